//! Side-pot arithmetic, kept apart from the state machine so it can be
//! reasoned about (and tested) on plain numbers.

use super::chips::Chips;
use super::error::RuleError;
use super::table::SeatNo;

/// One player's stake in the pots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stake {
    pub seat: SeatNo,
    pub committed: Chips,
    /// Still holding cards (not folded).
    pub live: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pot {
    pub amount: Chips,
    /// Live players who may win this pot, in seat order.
    pub eligible: Vec<SeatNo>,
}

/// The part of the biggest stake that nobody else matched, if it belongs to
/// a live player: it was never called, so it goes back rather than into a pot.
pub(crate) fn uncalled(stakes: &[Stake]) -> Option<(SeatNo, Chips)> {
    let top = stakes.iter().max_by_key(|s| s.committed)?;
    let second = stakes
        .iter()
        .filter(|s| s.seat != top.seat)
        .map(|s| s.committed)
        .max()
        .unwrap_or(Chips::ZERO);
    let excess = top.committed.saturating_sub(second);
    (top.live && !excess.is_zero()).then_some((top.seat, excess))
}

/// Splits the stakes into a main pot and side pots. Each distinct stake
/// level of a live player closes a pot; everyone (folded or not) pays into a
/// pot up to that level, and only live players who reached the level may win
/// it. Folded chips above the top live level are dead money added to the
/// last pot, so the pots always add up to the sum of the stakes.
pub(crate) fn build_pots(stakes: &[Stake]) -> Result<Vec<Pot>, RuleError> {
    let mut levels: Vec<Chips> = stakes
        .iter()
        .filter(|s| s.live && !s.committed.is_zero())
        .map(|s| s.committed)
        .collect();
    levels.sort_unstable();
    levels.dedup();

    let mut pots: Vec<Pot> = Vec::new();
    let mut prev = Chips::ZERO;
    for &level in &levels {
        let mut amount = Chips::ZERO;
        for s in stakes {
            let layer = s.committed.min(level).saturating_sub(prev);
            amount = amount.checked_add(layer).ok_or(RuleError::Overflow)?;
        }
        let eligible = stakes
            .iter()
            .filter(|s| s.live && s.committed >= level)
            .map(|s| s.seat)
            .collect();
        pots.push(Pot { amount, eligible });
        prev = level;
    }

    let dead = Chips::checked_sum(stakes.iter().map(|s| s.committed.saturating_sub(prev)))
        .ok_or(RuleError::Overflow)?;
    if !dead.is_zero() {
        match pots.last_mut() {
            Some(last) => {
                last.amount = last.amount.checked_add(dead).ok_or(RuleError::Overflow)?;
            }
            None => pots.push(Pot {
                amount: dead,
                eligible: stakes.iter().filter(|s| s.live).map(|s| s.seat).collect(),
            }),
        }
    }
    Ok(pots)
}

/// Equal shares of `amount` for `winners` (already ordered clockwise from the
/// button); the odd chips that cannot be split evenly all go to the first.
pub(crate) fn split(amount: Chips, winners: &[SeatNo]) -> Vec<(SeatNo, Chips)> {
    let n = winners.len() as u64;
    if n == 0 {
        return Vec::new();
    }
    let share = amount.0 / n;
    let odd = amount.0 % n;
    winners
        .iter()
        .enumerate()
        .map(|(i, &seat)| {
            let extra = if i == 0 { odd } else { 0 };
            (seat, Chips(share + extra))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stake(seat: SeatNo, committed: u64, live: bool) -> Stake {
        Stake {
            seat,
            committed: Chips(committed),
            live,
        }
    }

    #[test]
    fn three_all_ins_of_different_sizes_make_a_main_pot_and_two_side_pots() {
        let stakes = [
            stake(0, 50, true),
            stake(1, 100, true),
            stake(2, 200, true),
            stake(3, 200, true),
        ];
        let pots = build_pots(&stakes).expect("pots");
        assert_eq!(
            pots,
            vec![
                Pot {
                    amount: Chips(200),
                    eligible: vec![0, 1, 2, 3]
                },
                Pot {
                    amount: Chips(150),
                    eligible: vec![1, 2, 3]
                },
                Pot {
                    amount: Chips(200),
                    eligible: vec![2, 3]
                },
            ]
        );
    }

    #[test]
    fn folded_chips_go_into_the_pots_they_reached_but_cannot_win_them() {
        let stakes = [stake(0, 80, false), stake(1, 50, true), stake(2, 100, true)];
        let pots = build_pots(&stakes).expect("pots");
        assert_eq!(
            pots,
            vec![
                Pot {
                    amount: Chips(150),
                    eligible: vec![1, 2]
                },
                Pot {
                    amount: Chips(80),
                    eligible: vec![2]
                },
            ]
        );
    }

    #[test]
    fn folded_chips_above_every_live_stake_are_dead_money_in_the_top_pot() {
        let stakes = [
            stake(0, 300, false),
            stake(1, 100, true),
            stake(2, 100, true),
        ];
        let pots = build_pots(&stakes).expect("pots");
        assert_eq!(
            pots,
            vec![Pot {
                amount: Chips(500),
                eligible: vec![1, 2]
            }]
        );
        assert_eq!(uncalled(&stakes), None);
    }

    #[test]
    fn only_the_unmatched_part_of_a_live_top_stake_is_uncalled() {
        let stakes = [stake(0, 20, false), stake(1, 50, true), stake(2, 300, true)];
        assert_eq!(uncalled(&stakes), Some((2, Chips(250))));
        let tied = [stake(1, 300, true), stake(2, 300, true)];
        assert_eq!(uncalled(&tied), None);
    }

    #[test]
    fn odd_chips_go_to_the_first_winner_in_the_given_order() {
        assert_eq!(
            split(Chips(10), &[4, 1, 2]),
            vec![(4, Chips(4)), (1, Chips(3)), (2, Chips(3))]
        );
        assert_eq!(
            split(Chips(9), &[4, 1, 2]),
            vec![(4, Chips(3)), (1, Chips(3)), (2, Chips(3))]
        );
        assert_eq!(split(Chips(1), &[2, 0]), vec![(2, Chips(1)), (0, Chips(0))]);
    }
}

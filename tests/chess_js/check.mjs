// Replays games recorded by tests/chess_rules.rs through chess.js and
// reports, position by position, where the two disagree: the legal moves
// (UCI), check, the SAN of each move, the FEN after it (the en passant
// field aside: FEN allows writing it after any double step or only when
// a capture is possible, and the two engines choose differently), and
// how the game ended. Input: one JSON game per line,
// {"moves": [{"uci", "san", "fen", "legal": [...], "check": bool}], "end": reason|null}
// where `legal` and `check` are of the position before the move, `fen` of
// the position after it. Output: one JSON summary line.
import { readFileSync } from 'node:fs';
import { Chess } from 'chess.js';

const lines = readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.length > 0);
const ends = {};
const mismatches = [];
let positions = 0;

const uciOf = (m) => m.from + m.to + (m.promotion ?? '');
const withoutEp = (fen) => {
  const f = fen.split(' ');
  f[3] = '-';
  return f.join(' ');
};
// What ended the game in the position chess.js is in, in the order the
// game checks: checkmate, stalemate, insufficient material, threefold
// repetition, fifty moves.
const endOf = (c) => {
  if (c.isCheckmate()) return 'checkmate';
  if (c.isStalemate()) return 'stalemate';
  if (c.isInsufficientMaterial()) return 'insufficient_material';
  if (c.isThreefoldRepetition()) return 'threefold_repetition';
  if (c.isDrawByFiftyMoves()) return 'fifty_moves';
  return null;
};

lines.forEach((line, game) => {
  const g = JSON.parse(line);
  const c = new Chess();
  const wrong = (ply, what, ours, theirs) => {
    if (mismatches.length < 20) mismatches.push({ game, ply, what, ours, theirs, fen: c.fen() });
  };
  for (let ply = 0; ply < g.moves.length; ply++) {
    const m = g.moves[ply];
    positions++;
    const early = endOf(c);
    if (early !== null) {
      wrong(ply, 'game over before this move', null, early);
      return;
    }
    const legal = c.moves({ verbose: true }).map(uciOf).sort();
    if (JSON.stringify(legal) !== JSON.stringify(m.legal)) wrong(ply, 'legal moves', m.legal, legal);
    if (c.inCheck() !== m.check) wrong(ply, 'check', m.check, c.inCheck());
    let played;
    try {
      played = c.move({ from: m.uci.slice(0, 2), to: m.uci.slice(2, 4), promotion: m.uci[4] });
    } catch (e) {
      wrong(ply, 'move refused', m.uci, String(e));
      return;
    }
    if (played.san !== m.san) wrong(ply, 'san', m.san, played.san);
    if (withoutEp(c.fen()) !== withoutEp(m.fen)) wrong(ply, 'fen after', m.fen, c.fen());
  }
  positions++;
  const end = endOf(c);
  if (end !== g.end) wrong(g.moves.length, 'end', g.end, end);
  ends[end] = (ends[end] ?? 0) + 1;
});

console.log(JSON.stringify({ games: lines.length, positions, ends, mismatches }));
process.exit(mismatches.length === 0 ? 0 : 1);

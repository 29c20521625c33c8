//! pitboss reaches Redis over TLS (`rediss://`), trusting a private CA named
//! by `redis.tls_ca_file`; a server whose certificate it cannot verify is
//! refused, and `serve` does not start against it.

mod common;
mod play;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{test_db, unique_env, Server, ServerConfig};

/// A `redis-server` that speaks TLS only, with a certificate for
/// 127.0.0.1 signed by a CA of the test's own. Killed on drop.
struct TlsRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl TlsRedis {
    async fn start() -> TlsRedis {
        let dir =
            std::env::temp_dir().join(format!("pitboss-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        write_certificates(&dir);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let file = |name: &str| dir.join(name).display().to_string();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--tls-cert-file", &file("server.pem")])
            .args(["--tls-key-file", &file("server.key")])
            .args(["--tls-ca-cert-file", &file("ca.pem")])
            .args(["--tls-auth-clients", "no", "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server (run scripts/services.sh?)");
        let redis = TlsRedis { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if redis.ping().await {
                return redis;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the TLS redis-server did not answer on port {port}");
    }

    fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    fn client(&self) -> redis::Client {
        let ca = std::fs::read(self.ca_file()).expect("ca.pem");
        pitboss::lease::client(&self.url(), Some(ca)).expect("a TLS client")
    }

    async fn ping(&self) -> bool {
        let attempt = async {
            let mut c = self.client().get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<String>(&mut c).await
        };
        matches!(
            tokio::time::timeout(Duration::from_millis(500), attempt).await,
            Ok(Ok(_))
        )
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `ca.pem`, and `server.pem`/`server.key` for 127.0.0.1 and localhost
/// signed by that CA.
fn write_certificates(dir: &std::path::Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "pitboss test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .expect("server certificate");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write ca.pem");
    std::fs::write(dir.join("server.pem"), cert.pem()).expect("write server.pem");
    std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("write server.key");
}

#[tokio::test]
async fn over_rediss_with_a_private_ca_the_leases_live_on_the_tls_server() {
    let redis = TlsRedis::start().await;
    let db = test_db().await;
    let env = unique_env();
    let ca = redis.ca_file().display().to_string();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_redis(&redis.url())
            .with_env("PITBOSS__REDIS__TLS_CA_FILE", &ca),
    )
    .await;
    let t = play::new_table(&server).await;
    assert_eq!(server.table(&t).await["hosted_here"], true);
    let (status, _) = server.get("/readyz").await;
    assert_eq!(status, 200, "ready over TLS");

    // The lease is on the TLS server, and is renewed there.
    let mut conn = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("connect over TLS");
    let lease: Option<String> = redis::cmd("GET")
        .arg(common::lease_key(&env, &t))
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(lease.as_deref(), Some("inst-a|1"));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let ttl: i64 = redis::cmd("PTTL")
        .arg(common::lease_key(&env, &t))
        .query_async(&mut conn)
        .await
        .expect("PTTL");
    assert!(
        ttl > 1000,
        "renewed over TLS (PTTL {ttl} ms of a 1500 ms TTL)"
    );
}

#[tokio::test]
async fn a_tls_server_whose_certificate_cannot_be_verified_is_refused() {
    let redis = TlsRedis::start().await;
    let db = test_db().await;
    let env = unique_env();
    // No CA file: the system's trust store does not know the test's CA.
    let failed = Server::try_start(
        ServerConfig::new(&db, &env)
            .with_redis(&redis.url())
            .with_env("PITBOSS__REDIS__CONNECT_TIMEOUT_MS", "1000"),
    )
    .await;
    let Err(failure) = failed else {
        panic!("pitboss started against a Redis certificate it cannot verify");
    };
    assert!(
        failure.status.is_some_and(|s| !s.success()),
        "it exited with an error: {failure}"
    );
    let text = failure.logs.join("\n").to_lowercase();
    assert!(
        text.contains("certificate") || text.contains("unknownissuer"),
        "{failure}"
    );
}

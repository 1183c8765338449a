//! Connections cost nothing without bound: unauthenticated ones cannot crowd out the clients
//! who can log in, and a body that trickles in is cut off at the request timeout.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::management::{Management, text};

/// Python, from the test tools' virtualenv when scripts/test made one.
fn python() -> String {
    std::env::var("PYTHON_KUBERNETES").unwrap_or_else(|_| "python3".into())
}

/// Opens `count` TLS connections without a client certificate that send nothing, prints how
/// many it opened, waits for a line on stdin, then prints how many of them the server still
/// holds open.
const FLOOD: &str = r#"
import socket, ssl, sys, resource
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
held = []
for _ in range(min(count, hard - 100)):
    try:
        raw = socket.create_connection((host, port), timeout=5)
        held.append(context.wrap_socket(raw, server_hostname=host))
    except OSError:
        break
print(len(held), flush=True)
sys.stdin.readline()
still_open = 0
for s in held:
    s.settimeout(0.05)
    try:
        if s.recv(1):
            still_open += 1
    except (socket.timeout, ssl.SSLWantReadError):
        still_open += 1
    except (OSError, ssl.SSLError):
        pass
print(still_open, flush=True)
"#;

fn host_port(m: &Management) -> (String, String) {
    let address = m.server().trim_start_matches("https://").to_string();
    let (host, port) = address.rsplit_once(':').unwrap();
    (host.to_string(), port.to_string())
}

#[test]
fn ten_thousand_idle_tls_connections_do_not_crowd_out_kubectl() {
    let m = Management::up();
    let (host, port) = host_port(&m);
    let mut flood = Command::new(python())
        .args(["-c", FLOOD, &host, &port, "10000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(flood.stdout.take().unwrap()).lines();
    let opened: usize = lines.next().unwrap().unwrap().trim().parse().unwrap();
    assert!(opened >= 9_000, "opened only {opened} TLS connections");
    // While the client holds them all, kubectl's requests are answered within a second each.
    for _ in 0..5 {
        let started = Instant::now();
        let out = m.kubectl_output(
            &["--request-timeout=1s", "get", "namespaces", "-o", "name"],
            None,
        );
        assert!(
            out.status.success() && text(&out.stdout).contains("namespace/default"),
            "kubectl failed while {opened} connections were held: {}",
            text(&out.stderr)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    use std::io::Write;
    writeln!(flood.stdin.as_mut().unwrap()).unwrap();
    let still_open: usize = lines.next().unwrap().unwrap().trim().parse().unwrap();
    flood.wait().unwrap();
    assert!(
        still_open <= 1_024,
        "the server holds {still_open} unauthenticated connections"
    );
}

/// Sends a request with a client certificate whose body arrives one byte a second, and
/// prints the status line the server answers with and when.
const TRICKLE: &str = r#"
import socket, ssl, sys, time
host, port, cert, key, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.load_verify_locations(ca)
context.check_hostname = False
context.load_cert_chain(cert, key)
s = context.wrap_socket(socket.create_connection((host, port)), server_hostname=host)
body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"slow"}}'
s.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
started = time.time()
s.settimeout(1)
answer = b""
for byte in body:
    try:
        s.sendall(bytes([byte]))
    except OSError:
        break
    try:
        got = s.recv(4096)
        if not got:
            break
        answer += got
        break
    except socket.timeout:
        pass
print(answer.split(b"\r\n")[0].decode() or "closed", round(time.time() - started), flush=True)
"#;

#[test]
fn a_body_sent_a_byte_a_second_is_cut_off_at_the_request_timeout() {
    let m = Management::up_with_extra_args(&["--request-timeout=3s"]);
    let (host, port) = host_port(&m);
    let dir = std::path::Path::new(&m.state()).to_path_buf();
    let pki = capictl::pki::Pki::load_or_create(&dir).unwrap();
    let admin = pki
        .client_certificate("slow-admin", &["system:masters"])
        .unwrap();
    let cert = m.dir.join("slow.crt");
    let key = m.dir.join("slow.key");
    std::fs::write(&cert, &admin.cert).unwrap();
    std::fs::write(&key, &admin.key).unwrap();
    let ca = dir.join("ca.crt");
    let out = Command::new(python())
        .args(["-c", TRICKLE, &host, &port])
        .args([&cert, &key, &ca])
        .output()
        .unwrap();
    let answer = text(&out.stdout);
    assert!(out.status.success(), "{answer}{}", text(&out.stderr));
    let (status, seconds) = answer.trim().rsplit_once(' ').unwrap();
    let seconds: u64 = seconds.parse().unwrap();
    assert!(
        status.contains("504"),
        "answered {status:?} after {seconds} s"
    );
    assert!((2..=10).contains(&seconds), "answered after {seconds} s");
    let stored = m.kubectl_output(&["get", "configmap", "slow"], None);
    assert!(!stored.status.success(), "nothing was stored");
}

//! kubelet's network checks, for static Pods' readiness and for the probes and lifecycle hooks
//! of the Pods a node runs: an HTTP(S) GET (2xx and 3xx pass), a TCP connect, and gRPC's health
//! check. Like kubelet, HTTPS checks do not verify the server's certificate (kubeadm's
//! components serve self-signed ones on their health ports). Each says why it failed in
//! kubelet's words, for the `Unhealthy` Event.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::static_pods::Probe;
use crate::pki::join_host_port;

/// The most of a response kubelet reads for a probe's output.
const MAX_BODY: usize = 10 * 1024;

/// Sends a GET and reads the response's status code (and up to [`MAX_BODY`] of the rest).
async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
    path: &str,
    headers: &[(String, String)],
) -> std::io::Result<u16> {
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    let sets = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !sets("host") {
        request.push_str(&format!("Host: {host}\r\n"));
    }
    if !sets("user-agent") {
        request.push_str("User-Agent: kube-probe/capictl\r\n");
    }
    if !sets("accept") {
        request.push_str("Accept: */*\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !head.contains(&b'\n') && head.len() < MAX_BODY {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("malformed HTTP response {line:?}")))
}

/// An HTTP(S) GET to `host:port` `path` with `headers`, within `timeout`: Ok when the answer is
/// 2xx or 3xx, else why not, as kubelet says it.
pub async fn http_get(
    https: bool,
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<(), String> {
    let scheme = if https { "https" } else { "http" };
    let url = format!("{scheme}://{}{path}", join_host_port(host, port));
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(join_host_port(host, port)).await?;
        if https {
            let connector =
                tokio_rustls::TlsConnector::from(Arc::new(crate::pki::insecure_client_config()));
            let name = ServerName::try_from(host.to_string())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let tls = connector.connect(name, tcp).await?;
            get(tls, host, path, headers).await
        } else {
            get(tcp, host, path, headers).await
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(200..=399)) => Ok(()),
        Ok(Ok(code)) => Err(format!("HTTP probe failed with statuscode: {code}")),
        Ok(Err(e)) => Err(format!("Get {url:?}: {}", dial_error(host, port, &e))),
        Err(_) => Err(format!(
            "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

/// A TCP connect to `host:port` within `timeout`.
pub async fn tcp_connect(host: &str, port: u16, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(
        timeout,
        tokio::net::TcpStream::connect(join_host_port(host, port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(dial_error(host, port, &e)),
        Err(_) => Err(format!(
            "dial tcp {}: i/o timeout",
            join_host_port(host, port)
        )),
    }
}

/// Go's words for a failed dial.
fn dial_error(host: &str, port: u16, e: &std::io::Error) -> String {
    let why = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::ConnectionReset => "read: connection reset by peer".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {}: {why}", join_host_port(host, port))
}

/// gRPC's health check (`grpc.health.v1.Health/Check`) of `service` on `host:port`, over
/// HTTP/2 without TLS as kubelet's gRPC probe: Ok when the server answers `SERVING`.
pub async fn grpc_health(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
) -> Result<(), String> {
    use http_body_util::BodyExt;
    let target = join_host_port(host, port);
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(&target)
            .await
            .map_err(|e| format!("failed to connect service {target:?}: {e}"))?;
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .map_err(|e| format!("failed to connect service {target:?}: {e}"))?;
        let driver = tokio::spawn(connection);
        // A HealthCheckRequest: field 1, the service's name.
        let mut message = Vec::new();
        if !service.is_empty() {
            message.push(0x0a);
            let mut length = service.len();
            while length >= 0x80 {
                message.push((length as u8 & 0x7f) | 0x80);
                length >>= 7;
            }
            message.push(length as u8);
            message.extend_from_slice(service.as_bytes());
        }
        let mut frame = vec![0u8];
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(&message);
        let request = http::Request::post(format!("http://{target}/grpc.health.v1.Health/Check"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("user-agent", "kube-probe/capictl")
            .body(http_body_util::Full::new(bytes::Bytes::from(frame)))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("health rpc failed: {e}"))?;
        let grpc_status = |headers: &http::HeaderMap| {
            headers
                .get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let early = grpc_status(response.headers());
        let collected = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("health rpc failed: {e}"))?;
        driver.abort();
        let status = early.or_else(|| collected.trailers().and_then(grpc_status));
        match status.as_deref() {
            Some("0") => {}
            Some("12") => {
                return Err(
                    "this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health".to_string(),
                );
            }
            other => {
                return Err(format!(
                    "health rpc failed: grpc-status {}",
                    other.unwrap_or("missing")
                ));
            }
        }
        let body = collected.to_bytes();
        // A HealthCheckResponse: field 1 (varint) is the serving status.
        let serving = body.get(5..).unwrap_or_default();
        let status = match serving {
            [0x08, s, ..] => *s,
            _ => 0,
        };
        match status {
            1 => Ok(()),
            s => {
                let name = match s {
                    2 => "NOT_SERVING",
                    3 => "SERVICE_UNKNOWN",
                    _ => "UNKNOWN",
                };
                Err(format!("service unhealthy (responded with {name:?})"))
            }
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "timeout: health rpc did not complete within {}s",
            timeout.as_secs_f64()
        )),
    }
}

/// Runs a static Pod's probe once, within `timeout`; whether it passed.
pub async fn check(probe: &Probe, timeout: Duration) -> bool {
    http_get(
        probe.https,
        &probe.host,
        probe.port,
        &probe.path,
        &[],
        timeout,
    )
    .await
    .is_ok()
}

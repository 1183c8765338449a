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

#[cfg(test)]
mod tests {
    //! Each check against a real server on 127.0.0.1: what passes, what fails, and the words.

    use super::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    use tokio::net::TcpListener;

    const SECOND: Duration = Duration::from_secs(1);

    /// An HTTP/1.1 server answering every request with `status`, and the requests it read.
    async fn http_server(
        status: u16,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (sent, seen) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let (tls, sent) = (tls.clone(), sent.clone());
                tokio::spawn(async move {
                    let answer = async |mut s: Box<dyn AsyncReadWrite>| {
                        let mut request = vec![0u8; 4096];
                        let n = s.read(&mut request).await.unwrap_or(0);
                        let _ = sent.send(String::from_utf8_lossy(&request[..n]).to_string());
                        let response = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
                        let _ = s.write_all(response.as_bytes()).await;
                    };
                    match tls {
                        Some(acceptor) => {
                            answer(Box::new(acceptor.accept(tcp).await.unwrap())).await
                        }
                        None => answer(Box::new(tcp)).await,
                    }
                });
            }
        });
        (port, seen)
    }

    trait AsyncReadWrite: AsyncRead + AsyncWrite + Unpin + Send {}
    impl<T: AsyncRead + AsyncWrite + Unpin + Send> AsyncReadWrite for T {}

    /// A port nothing listens on.
    async fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn http_probes_pass_on_2xx_and_3xx_and_say_why_otherwise() {
        let headers = [("X-Probe".to_string(), "yes".to_string())];
        for (status, passes) in [(200, true), (302, true), (404, false), (503, false)] {
            let (port, mut seen) = http_server(status, None).await;
            let result = http_get(false, "127.0.0.1", port, "/healthz", &headers, SECOND).await;
            assert_eq!(result.is_ok(), passes, "{status}: {result:?}");
            if !passes {
                assert_eq!(
                    result.unwrap_err(),
                    format!("HTTP probe failed with statuscode: {status}")
                );
            }
            let request = seen.recv().await.unwrap();
            assert!(
                request.starts_with("GET /healthz HTTP/1.1\r\n"),
                "{request}"
            );
            assert!(request.contains("User-Agent: kube-probe/capictl\r\n"));
            assert!(request.contains("X-Probe: yes\r\n"));
        }
        let port = closed_port().await;
        assert_eq!(
            http_get(false, "127.0.0.1", port, "/", &[], SECOND).await,
            Err(format!(
                "Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    #[tokio::test]
    async fn https_probes_do_not_check_the_servers_certificate() {
        crate::install_crypto_provider();
        let pki = crate::pki::Pki::generate("probe-ca").unwrap();
        let serving = pki.serving_certificate(&["127.0.0.1".into()]).unwrap();
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(serving.cert.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let key = PrivateKeyDer::from_pem_slice(serving.key.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let (port, mut seen) = http_server(200, Some(acceptor)).await;
        assert_eq!(
            http_get(true, "127.0.0.1", port, "/livez", &[], SECOND).await,
            Ok(())
        );
        assert!(seen.recv().await.unwrap().starts_with("GET /livez "));
    }

    #[tokio::test]
    async fn tcp_probes_pass_when_the_port_accepts() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(tcp_connect("127.0.0.1", port, SECOND).await, Ok(()));
        drop(listener);
        assert_eq!(
            tcp_connect("127.0.0.1", port, SECOND).await,
            Err(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    /// A gRPC server over HTTP/2 answering `grpc.health.v1.Health/Check`: SERVING for the
    /// server as a whole (""), NOT_SERVING for any named service.
    async fn grpc_server() -> u16 {
        use http_body_util::{BodyExt, StreamBody};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let service = hyper::service::service_fn(
                    |request: http::Request<hyper::body::Incoming>| async move {
                        assert_eq!(request.uri().path(), "/grpc.health.v1.Health/Check");
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        // The request's frame: a flag, a length, then field 1 (the service).
                        let asked =
                            String::from_utf8_lossy(body.get(7..).unwrap_or_default()).to_string();
                        let mut trailers = http::HeaderMap::new();
                        let mut frames = Vec::new();
                        let serving = if asked.is_empty() { 1u8 } else { 2 };
                        let mut frame = vec![0u8, 0, 0, 0, 2];
                        frame.extend([0x08, serving]);
                        frames.push(Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(
                            bytes::Bytes::from(frame),
                        )));
                        trailers.insert("grpc-status", "0".parse().unwrap());
                        frames.push(Ok(hyper::body::Frame::trailers(trailers)));
                        let response = http::Response::builder()
                            .header("content-type", "application/grpc")
                            .body(StreamBody::new(futures::stream::iter(frames)))
                            .unwrap();
                        Ok::<_, std::convert::Infallible>(response)
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
                );
            }
        });
        port
    }

    #[tokio::test]
    async fn grpc_probes_pass_when_the_service_is_serving() {
        let port = grpc_server().await;
        assert_eq!(grpc_health("127.0.0.1", port, "", SECOND).await, Ok(()));
        assert_eq!(
            grpc_health("127.0.0.1", port, "db", SECOND).await,
            Err("service unhealthy (responded with \"NOT_SERVING\")".to_string())
        );
        let closed = closed_port().await;
        let refused = grpc_health("127.0.0.1", closed, "", SECOND)
            .await
            .unwrap_err();
        assert!(
            refused.starts_with(&format!("failed to connect service \"127.0.0.1:{closed}\"")),
            "{refused}"
        );
    }
}

//! kubelet's HTTP(S) GET probe: 2xx and 3xx pass. Like kubelet, HTTPS probes do not verify
//! the server's certificate (kubeadm's components serve self-signed ones on their health
//! ports).

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::static_pods::Probe;

async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
    path: &str,
) -> std::io::Result<u16> {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: kube-probe/capictl\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        let n = stream.read(&mut head[read..]).await?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let line = String::from_utf8_lossy(&head[..read]);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {line:?}")))
}

/// Runs the probe once, within `timeout`; whether it passed.
pub async fn check(probe: &Probe, timeout: Duration) -> bool {
    let attempt = async {
        let address = super::kubeadm::pki::join_host_port(&probe.host, probe.port);
        let tcp = tokio::net::TcpStream::connect(&address).await?;
        let status = if probe.https {
            let connector =
                tokio_rustls::TlsConnector::from(Arc::new(crate::pki::insecure_client_config()));
            let name = ServerName::try_from(probe.host.clone())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let tls = connector.connect(name, tcp).await?;
            get(tls, &probe.host, &probe.path).await?
        } else {
            get(tcp, &probe.host, &probe.path).await?
        };
        Ok::<_, std::io::Error>(status)
    };
    matches!(
        tokio::time::timeout(timeout, attempt).await,
        Ok(Ok(200..=399))
    )
}

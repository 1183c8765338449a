//! When a control plane's serving certificate expires, read as upstream's control plane
//! provider reads it: by a TLS handshake with the Machine's API server, taking the leaf
//! certificate's `notAfter`. Nothing is sent over the connection.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rustls::pki_types::ServerName;

/// How long a handshake may take before the API server counts as unreachable.
const HANDSHAKE: Duration = Duration::from_secs(3);

/// The expiry of the certificate the API server at `address` (`host:port`) serves.
pub async fn serving_certificate_expiry(address: &str) -> Result<Timestamp, String> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(h, _)| h)
        .trim_matches(['[', ']']);
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("{address}: not a host name or address: {e}"))?;
    let config = std::sync::Arc::new(crate::pki::insecure_client_config());
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())
    };
    let tls = tokio::time::timeout(HANDSHAKE, handshake)
        .await
        .map_err(|_| format!("{address}: no TLS handshake within {HANDSHAKE:?}"))?
        .map_err(|e| format!("{address}: {e}"))?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or_else(|| format!("{address}: the server sent no certificate"))?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|e| format!("{address}: the serving certificate cannot be read: {e}"))?;
    Timestamp::from_second(cert.validity().not_after.timestamp())
        .map_err(|e| format!("{address}: {e}"))
}

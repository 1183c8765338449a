//! JSON over HTTPS to the servers a management cluster trusts by a CA bundle in its objects
//! (`clientConfig.caBundle`): admission webhooks and Runtime Extensions.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

/// The most of an answer read: a server that sends more is broken.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Where a server is called: the address to connect to, the name its certificate must carry,
/// the request path and the CA bundle to trust (the system's roots without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Destination {
    pub address: String,
    pub server_name: String,
    pub path: String,
    pub ca_bundle: Option<Vec<u8>>,
}

/// The system's CA certificates, read from disk once.
static SYSTEM_ROOTS: LazyLock<rustls::RootCertStore> = LazyLock::new(|| {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    roots
});

/// The TLS client for a server: its CA bundle, or the system's roots.
pub fn tls_config(ca_bundle: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("clientConfig.caBundle: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("clientConfig.caBundle: {e}"))?;
            }
            if roots.is_empty() {
                return Err("clientConfig.caBundle holds no certificate".to_string());
            }
        }
        None => roots = SYSTEM_ROOTS.clone(),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// POSTs JSON to the destination and reads the JSON it answers.
pub async fn post_json(destination: &Destination, body: Vec<u8>) -> Result<Value, String> {
    use http_body_util::BodyExt;
    let config = tls_config(destination.ca_bundle.as_deref())?;
    let name = rustls::pki_types::ServerName::try_from(destination.server_name.clone())
        .map_err(|e| format!("{:?}: {e}", destination.server_name))?;
    let url = format!("https://{}{}", destination.address, destination.path);
    let tcp = tokio::net::TcpStream::connect(&destination.address)
        .await
        .map_err(|e| format!("Post {url:?}: dial tcp {}: {e}", destination.address))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("Post {url:?}: tls: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| format!("Post {url:?}: {e}"))?;
    let driver = tokio::spawn(connection);
    let request = http::Request::post(destination.path.as_str())
        .header(http::header::HOST, destination.server_name.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("Post {url:?}: {e}"))?;
    let status = response.status();
    let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| format!("Post {url:?}: reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    if !status.is_success() {
        return Err(format!(
            "Post {url:?}: the server answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(256)])
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
}

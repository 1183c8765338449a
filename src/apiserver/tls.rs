//! The TLS configuration of a server that authenticates clients by their certificate (CN is
//! the user, O the groups; [`super::listener`] serves connections with it), checked against
//! the cluster's CAs (the certificates themselves are [`crate::pki`]'s).

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::User;
use crate::pki::{KeyPairPem, PkiError};

/// How a server speaks TLS: its configuration, and the check of client certificate chains it
/// makes once a connection is up (None: client certificates are not asked for).
pub struct ServerTls {
    pub(super) config: Arc<rustls::ServerConfig>,
    pub(super) client_chains: Option<Arc<ClientCas>>,
}

impl ServerTls {
    /// The rustls configuration, for a server of its own (a Runtime Extension's).
    pub fn rustls_config(&self) -> Arc<rustls::ServerConfig> {
        self.config.clone()
    }
}

/// A TLS configuration that serves `serving` and checks client certificates against the CAs
/// in `client_ca` (PEM; kube-apiserver's `--client-ca-file`); clients without a certificate
/// are let through as anonymous.
pub fn server_config(client_ca: &str, serving: &KeyPairPem) -> Result<ServerTls, PkiError> {
    let cas = Arc::new(ClientCas::from_pem(client_ca)?);
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(serving.cert.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(serving.key.as_bytes())?;
    let mut config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(Arc::new(ChainCheckedLater { cas: cas.clone() }))
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        client_chains: Some(cas),
    })
}

/// The CAs client certificates chain to, checked as Go's `crypto/x509` checks them for
/// kube-apiserver: signature, issuer, validity and (when the certificate says) client use —
/// X.509 v1 certificates included, which `openssl x509 -req` makes without an extensions file
/// and which webpki refuses.
#[derive(Debug)]
pub struct ClientCas {
    roots: Vec<CertificateDer<'static>>,
    hints: Vec<rustls::DistinguishedName>,
}

/// How deep a chain of intermediates may go.
const MAX_CHAIN: usize = 4;

impl ClientCas {
    pub fn from_pem(pem: &str) -> Result<ClientCas, PkiError> {
        let roots: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>()?;
        let mut hints = Vec::new();
        for root in &roots {
            let (_, parsed) = x509_parser::parse_x509_certificate(root.as_ref())
                .map_err(|e| PkiError::Key(format!("a client CA certificate: {e}")))?;
            hints.push(rustls::DistinguishedName::from(
                parsed.subject().as_raw().to_vec(),
            ));
        }
        Ok(ClientCas { roots, hints })
    }

    /// Whether `leaf` (with the `intermediates` the client sent) chains to one of the CAs at
    /// `now`; why not otherwise.
    pub fn verify(
        &self,
        leaf: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: time::OffsetDateTime,
    ) -> Result<(), String> {
        let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref())
            .map_err(|e| format!("the certificate cannot be read: {e}"))?;
        if let Ok(Some(usage)) = parsed.extended_key_usage()
            && !usage.value.any
            && !usage.value.client_auth
        {
            return Err("the certificate is not for client authentication".into());
        }
        self.chains(leaf.as_ref(), &parsed, intermediates, now, 0)
    }

    fn chains(
        &self,
        der: &[u8],
        cert: &x509_parser::certificate::X509Certificate<'_>,
        intermediates: &[CertificateDer<'_>],
        now: time::OffsetDateTime,
        depth: usize,
    ) -> Result<(), String> {
        let at = x509_parser::time::ASN1Time::from_timestamp(now.unix_timestamp())
            .map_err(|e| e.to_string())?;
        if !cert.validity().is_valid_at(at) {
            return Err(format!(
                "the certificate {} is not valid now (from {} until {})",
                cert.subject(),
                cert.validity().not_before,
                cert.validity().not_after
            ));
        }
        let issuer = cert.issuer().as_raw();
        for root in &self.roots {
            if let Ok((_, ca)) = x509_parser::parse_x509_certificate(root.as_ref())
                && ca.subject().as_raw() == issuer
                && signed_by(der, ca.public_key().raw)
            {
                return Ok(());
            }
        }
        if depth < MAX_CHAIN {
            for next in intermediates {
                if let Ok((_, ca)) = x509_parser::parse_x509_certificate(next.as_ref())
                    && ca.subject().as_raw() == issuer
                    && ca.is_ca()
                    && signed_by(der, ca.public_key().raw)
                    && self
                        .chains(next.as_ref(), &ca, intermediates, now, depth + 1)
                        .is_ok()
                {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "{} is not signed by the cluster's CA",
            cert.subject()
        ))
    }
}

/// The signature algorithms a certificate or a handshake may use (ring's, as rustls has them).
fn algorithms() -> rustls::crypto::WebPkiSupportedAlgorithms {
    rustls::crypto::ring::default_provider().signature_verification_algorithms
}

/// Whether the certificate `der` carries a signature made with the key in `issuer_spki` (a
/// SubjectPublicKeyInfo).
fn signed_by(der: &[u8], issuer_spki: &[u8]) -> bool {
    let Some((tbs, signature_algorithm, signature)) = crate::pki::der::certificate_parts(der)
    else {
        return false;
    };
    let Some((key_algorithm, key)) = crate::pki::der::spki_parts(issuer_spki) else {
        return false;
    };
    algorithms().all.iter().any(|alg| {
        alg.signature_alg_id().as_ref() == signature_algorithm
            && alg.public_key_alg_id().as_ref() == key_algorithm
            && alg.verify_signature(key, tbs, signature).is_ok()
    })
}

/// The SubjectPublicKeyInfo of `cert` (any X.509 version).
fn public_key(cert: &CertificateDer<'_>) -> Result<Vec<u8>, rustls::Error> {
    x509_parser::parse_x509_certificate(cert.as_ref())
        .map(|(_, parsed)| parsed.public_key().raw.to_vec())
        .map_err(|_| rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))
}

/// Checks a TLS 1.2 handshake signature with the public key of `cert` (any X.509 version):
/// each algorithm the scheme may stand for is tried, as rustls does.
fn verify_tls12_handshake(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &rustls::DigitallySignedStruct,
) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
    let bad = || rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature);
    let spki = public_key(cert)?;
    let (key_algorithm, key) = crate::pki::der::spki_parts(&spki).ok_or_else(bad)?;
    algorithms()
        .mapping
        .iter()
        .filter(|(scheme, _)| *scheme == dss.scheme)
        .flat_map(|(_, candidates)| candidates.iter())
        .filter(|alg| alg.public_key_alg_id().as_ref() == key_algorithm)
        .any(|alg| alg.verify_signature(key, message, dss.signature()).is_ok())
        .then(rustls::client::danger::HandshakeSignatureValid::assertion)
        .ok_or_else(bad)
}

/// Takes any client certificate in the handshake (the client still proves it holds the key),
/// so that a certificate the CA did not sign is answered with 401, as kube-apiserver answers
/// it, instead of a failed handshake that clients report as "broken pipe". The chain is
/// checked against the CA once the connection is up ([`verified_user`]).
#[derive(Debug)]
struct ChainCheckedLater {
    cas: Arc<ClientCas>,
}

impl rustls::server::danger::ClientCertVerifier for ChainCheckedLater {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.cas.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        verify_tls12_handshake(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let spki = public_key(cert)?;
        rustls::crypto::verify_tls13_signature_with_raw_key(
            message,
            &rustls::pki_types::SubjectPublicKeyInfoDer::from(spki.as_slice()),
            dss,
            &algorithms(),
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        algorithms().supported_schemes()
    }
}

/// The user of a connection's client certificate, once its chain checks out against the CA;
/// None without a certificate, or with one the CA did not sign (then every request but the
/// anonymous ones gets 401).
pub(super) fn verified_user(
    connection: &rustls::ServerConnection,
    cas: &ClientCas,
    peer: SocketAddr,
) -> Option<User> {
    let certs = connection.peer_certificates()?;
    let (end_entity, intermediates) = certs.split_first()?;
    if let Err(e) = cas.verify(end_entity, intermediates, time::OffsetDateTime::now_utc()) {
        tracing::debug!(%peer, error = %e, "client certificate refused");
        return None;
    }
    user_of(end_entity)
}

/// A TLS configuration that serves `serving` to any client (an admission webhook server or a
/// Runtime Extension: the caller trusts it through a caBundle instead).
pub fn plain_server_config(serving: &KeyPairPem) -> Result<ServerTls, PkiError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(serving.cert.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(serving.key.as_bytes())?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        client_chains: None,
    })
}

/// The user a verified client certificate names.
fn user_of(cert: &CertificateDer<'_>) -> Option<User> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(User {
        name,
        groups,
        ..User::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `cert` (PEM) chains to `ca` (PEM), as the API server checks client certificates.
    fn chains_to(cert: &str, ca: &str) -> bool {
        let leaf = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        ClientCas::from_pem(ca)
            .unwrap()
            .verify(&leaf, &[], time::OffsetDateTime::now_utc())
            .is_ok()
    }

    #[test]
    fn x509_v1_client_certificates_chain_to_the_ca_that_signed_them() {
        crate::install_crypto_provider();
        // `openssl x509 -req` without an extensions file: version 1, no extensions.
        let alice = include_str!("testdata/v1-rsa-client.crt");
        let bob = include_str!("testdata/v1-ec-client.crt");
        let rsa_ca = include_str!("testdata/rsa-pkcs1.crt");
        let ec_ca = include_str!("testdata/ec-sec1.crt");
        assert!(chains_to(alice, rsa_ca));
        assert!(chains_to(bob, ec_ca));
        assert!(!chains_to(alice, ec_ca), "another CA did not sign it");
        assert!(!chains_to(bob, rsa_ca));
        let user = user_of(&CertificateDer::from_pem_slice(alice.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            (user.name.as_str(), user.groups),
            ("alice", vec!["developers".to_string()])
        );
        // A certificate made for servers is not a client's.
        let ours = crate::pki::Pki::generate("ours").unwrap();
        let serving = ours.serving_certificate(&["localhost".into()]).unwrap();
        assert!(!chains_to(&serving.cert, &ours.ca.cert));
        let client = ours.client_certificate("carol", &[]).unwrap();
        assert!(chains_to(&client.cert, &ours.ca.cert));
    }
}

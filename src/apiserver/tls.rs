//! The server's certificates (an ECDSA CA made at first start, a serving certificate and
//! client certificates it signs) and the TLS configuration that authenticates clients by their
//! certificate: CN is the user, O the groups ([`super::listener`] serves connections with it).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::User;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("reading a PEM file: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("client verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    #[error("the private key cannot be used: {0}")]
    Key(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A certificate and its private key, PEM-encoded.
#[derive(Clone)]
pub struct KeyPairPem {
    pub cert: String,
    pub key: String,
}

/// What a certificate may be used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
    /// etcd's serving and peer certificates: each member is both.
    ServerAndClient,
}

/// The cluster's certificate authority.
#[derive(Clone)]
pub struct Pki {
    pub ca: KeyPairPem,
}

/// A private key as openssl, kubeadm and capictl write them: PKCS#8 (`PRIVATE KEY`), PKCS#1
/// RSA (`RSA PRIVATE KEY`, `openssl genrsa -traditional`, kubeadm's RSA keys) or SEC1 EC
/// (`EC PRIVATE KEY`, `openssl ecparam -genkey`). The signing backend reads PKCS#8 only, so
/// the other two are wrapped in a PKCS#8 envelope first.
pub fn key_pair_from_pem(pem: &str) -> Result<KeyPair, TlsError> {
    let key = PrivateKeyDer::from_pem_slice(pem.as_bytes())?;
    let pkcs8 = match &key {
        PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
        PrivateKeyDer::Pkcs1(k) => der::pkcs8(&der::rsa_algorithm(), k.secret_pkcs1_der()),
        PrivateKeyDer::Sec1(k) => {
            let curve = der::sec1_curve(k.secret_sec1_der()).ok_or_else(|| {
                TlsError::Key("an EC private key without its curve (parameters [0])".into())
            })?;
            der::pkcs8(&der::ec_algorithm(&curve), k.secret_sec1_der())
        }
        _ => return Err(TlsError::Key("an unknown private key format".into())),
    };
    KeyPair::try_from(pkcs8).map_err(|e| {
        TlsError::Key(format!(
            "{e}: capictl signs with ECDSA P-256 or P-384 keys and RSA keys of 2048 bits or more"
        ))
    })
}

/// The few DER structures needed to wrap a key in PKCS#8.
mod der {
    /// A DER element: tag, length, contents.
    fn element(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = contents.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len
                .to_be_bytes()
                .into_iter()
                .skip_while(|b| *b == 0)
                .collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(contents);
        out
    }

    const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

    pub fn rsa_algorithm() -> Vec<u8> {
        let mut contents = element(0x06, RSA_ENCRYPTION);
        contents.extend([0x05, 0x00]);
        element(0x30, &contents)
    }

    /// `curve` is the named curve's OID element, as it appears in the SEC1 key.
    pub fn ec_algorithm(curve: &[u8]) -> Vec<u8> {
        let mut contents = element(0x06, EC_PUBLIC_KEY);
        contents.extend_from_slice(curve);
        element(0x30, &contents)
    }

    /// PrivateKeyInfo { version 0, algorithm, privateKey OCTET STRING }.
    pub fn pkcs8(algorithm: &[u8], private_key: &[u8]) -> Vec<u8> {
        let mut contents = vec![0x02, 0x01, 0x00];
        contents.extend_from_slice(algorithm);
        contents.extend(element(0x04, private_key));
        element(0x30, &contents)
    }

    /// Splits one element off `data`: (tag, contents, rest).
    fn split(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = data.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |l, b| (l << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }

    /// A Certificate's signed bytes (the TBSCertificate element, as signed), its signature
    /// algorithm (the AlgorithmIdentifier's contents) and its signature.
    pub fn certificate_parts(der: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
        let (0x30, fields, _) = split(der)? else {
            return None;
        };
        let (0x30, _, rest) = split(fields)? else {
            return None;
        };
        let tbs = &fields[..fields.len() - rest.len()];
        let (0x30, algorithm, rest) = split(rest)? else {
            return None;
        };
        let (0x03, signature, _) = split(rest)? else {
            return None;
        };
        // A BIT STRING starts with its count of unused bits, none here.
        Some((tbs, algorithm, signature.strip_prefix(&[0])?))
    }

    /// A SubjectPublicKeyInfo's algorithm (the AlgorithmIdentifier's contents) and key bits.
    pub fn spki_parts(der: &[u8]) -> Option<(&[u8], &[u8])> {
        let (0x30, fields, _) = split(der)? else {
            return None;
        };
        let (0x30, algorithm, rest) = split(fields)? else {
            return None;
        };
        let (0x03, key, _) = split(rest)? else {
            return None;
        };
        Some((algorithm, key.strip_prefix(&[0])?))
    }

    /// The named curve's OID element of a SEC1 ECPrivateKey (its `parameters [0]`).
    pub fn sec1_curve(key: &[u8]) -> Option<Vec<u8>> {
        let (0x30, mut fields, _) = split(key)? else {
            return None;
        };
        while !fields.is_empty() {
            let (tag, contents, rest) = split(fields)?;
            if tag == 0xa0 {
                let (0x06, _, _) = split(contents)? else {
                    return None;
                };
                return Some(contents.to_vec());
            }
            fields = rest;
        }
        None
    }
}

/// Writes a file only its owner can read (private keys, kubeconfigs).
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    // A little slack for clocks that are slightly behind.
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(days);
}

impl Pki {
    /// A new CA (ECDSA P-256, ten years).
    pub fn generate(common_name: &str) -> Result<Pki, TlsError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, 3650);
        let cert = params.self_signed(&key)?;
        Ok(Pki {
            ca: KeyPairPem {
                cert: cert.pem(),
                key: key.serialize_pem(),
            },
        })
    }

    /// The CA in `dir` (`ca.crt`, `ca.key`), made on first use.
    pub fn load_or_create(dir: &Path) -> Result<Pki, TlsError> {
        let cert_path = dir.join("ca.crt");
        let key_path = dir.join("ca.key");
        if cert_path.exists() && key_path.exists() {
            let cert = std::fs::read_to_string(&cert_path).map_err(io_error(&cert_path))?;
            let key = std::fs::read_to_string(&key_path).map_err(io_error(&key_path))?;
            return Ok(Pki {
                ca: KeyPairPem { cert, key },
            });
        }
        let pki = Pki::generate("capictl-management-ca")?;
        std::fs::write(&cert_path, &pki.ca.cert).map_err(io_error(&cert_path))?;
        write_private(&key_path, pki.ca.key.as_bytes()).map_err(io_error(&key_path))?;
        Ok(pki)
    }

    /// A certificate the CA signs (ECDSA P-256, one year), for these subject alternative names
    /// (DNS names and IP addresses alike).
    pub fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        sans: &[String],
        usage: Usage,
    ) -> Result<KeyPairPem, TlsError> {
        let ca_key = key_pair_from_pem(&self.ca.key)?;
        let issuer = Issuer::from_ca_cert_pem(&self.ca.cert, ca_key)?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for o in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = match usage {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::ServerAndClient => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        validity(&mut params, 365);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(KeyPairPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// A serving certificate for these host names and addresses.
    pub fn serving_certificate(&self, hosts: &[String]) -> Result<KeyPairPem, TlsError> {
        self.issue("capictl-apiserver", &[], hosts, Usage::Server)
    }

    /// A client certificate: the user is the CN, the groups are the organizations.
    pub fn client_certificate(&self, user: &str, groups: &[&str]) -> Result<KeyPairPem, TlsError> {
        self.issue(user, groups, &[], Usage::Client)
    }

    /// A TLS configuration that serves `serving` and checks client certificates against the CA
    /// (clients without one are let through as anonymous).
    pub fn server_config(&self, serving: &KeyPairPem) -> Result<ServerTls, TlsError> {
        server_config(&self.ca.cert, serving)
    }
}

/// How a server speaks TLS: its configuration, and the check of client certificate chains it
/// makes once a connection is up (None: client certificates are not asked for).
pub struct ServerTls {
    pub(super) config: Arc<rustls::ServerConfig>,
    pub(super) client_chains: Option<Arc<ClientCas>>,
}

/// A TLS configuration that serves `serving` and checks client certificates against the CAs
/// in `client_ca` (PEM; kube-apiserver's `--client-ca-file`); clients without a certificate
/// are let through as anonymous.
pub fn server_config(client_ca: &str, serving: &KeyPairPem) -> Result<ServerTls, TlsError> {
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
    pub fn from_pem(pem: &str) -> Result<ClientCas, TlsError> {
        let roots: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>()?;
        let mut hints = Vec::new();
        for root in &roots {
            let (_, parsed) = x509_parser::parse_x509_certificate(root.as_ref())
                .map_err(|e| TlsError::Key(format!("a client CA certificate: {e}")))?;
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
    let Some((tbs, signature_algorithm, signature)) = der::certificate_parts(der) else {
        return false;
    };
    let Some((key_algorithm, key)) = der::spki_parts(issuer_spki) else {
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
    let (key_algorithm, key) = der::spki_parts(&spki).ok_or_else(bad)?;
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

/// A TLS configuration that serves `serving` to any client (an admission webhook server: the
/// API server calling it is trusted through the webhook configuration's caBundle instead).
pub fn plain_server_config(serving: &KeyPairPem) -> Result<ServerTls, TlsError> {
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
    fn cas_made_by_openssl_sign_in_every_key_format() {
        crate::install_crypto_provider();
        for (what, cert, key) in [
            (
                "SEC1 EC (openssl ecparam -genkey)",
                include_str!("testdata/ec-sec1.crt"),
                include_str!("testdata/ec-sec1.key"),
            ),
            (
                "PKCS#1 RSA (openssl genrsa -traditional)",
                include_str!("testdata/rsa-pkcs1.crt"),
                include_str!("testdata/rsa-pkcs1.key"),
            ),
            (
                "PKCS#8 RSA (openssl pkcs8 -topk8)",
                include_str!("testdata/rsa-pkcs1.crt"),
                include_str!("testdata/rsa-pkcs8.key"),
            ),
        ] {
            let ca = Pki {
                ca: KeyPairPem {
                    cert: cert.into(),
                    key: key.into(),
                },
            };
            let alice = ca
                .client_certificate("alice", &["developers"])
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(chains_to(&alice.cert, cert), "{what}");
        }
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
        let ours = Pki::generate("ours").unwrap();
        let serving = ours.serving_certificate(&["localhost".into()]).unwrap();
        assert!(!chains_to(&serving.cert, &ours.ca.cert));
        let client = ours.client_certificate("carol", &[]).unwrap();
        assert!(chains_to(&client.cert, &ours.ca.cert));
    }

    #[test]
    fn a_key_that_cannot_be_read_says_so() {
        let broken = "-----BEGIN EC PRIVATE KEY-----\nMAMCAQE=\n-----END EC PRIVATE KEY-----\n";
        let Err(e) = key_pair_from_pem(broken) else {
            panic!("a broken key was accepted");
        };
        let e = e.to_string();
        assert!(e.contains("private key"), "{e}");
    }
}

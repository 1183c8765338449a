//! The cluster's certificates and keys: a certificate authority made or brought (ECDSA P-256
//! made here unless kubeadm's `encryptionAlgorithm` asks for P-384 or RSA; RSA and EC keys in
//! every format openssl and kubeadm write, read), the serving and
//! client certificates it signs, private files written 0600, and the TLS client that probes
//! trust any server with. Below every part that needs them: the API server, kubeadm, the
//! nodes and the providers.

use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("reading a PEM file: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
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

/// The kind of key a new certificate gets (kubeadm's `encryptionAlgorithm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyAlgorithm {
    #[default]
    EcdsaP256,
    EcdsaP384,
    /// RSA with a modulus of this many bits.
    Rsa(usize),
}

impl KeyAlgorithm {
    /// A new private key. RSA keys are made by the `rsa` crate (the signing backend cannot
    /// make them) and signed with as PKCS#1 v1.5 SHA-256, as Go's x509 signs with RSA keys.
    pub fn generate(self) -> Result<KeyPair, PkiError> {
        match self {
            KeyAlgorithm::EcdsaP256 => Ok(KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?),
            KeyAlgorithm::EcdsaP384 => Ok(KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384)?),
            KeyAlgorithm::Rsa(bits) => {
                use rsa::pkcs8::EncodePrivateKey;
                let key = rsa::PrivateKey::new(&mut getrandom::SysRng, bits)
                    .map_err(|e| PkiError::Key(format!("making a {bits}-bit RSA key: {e}")))?;
                let der = key
                    .to_pkcs8_der()
                    .map_err(|e| PkiError::Key(format!("encoding an RSA key: {e}")))?;
                Ok(KeyPair::from_pkcs8_der_and_sign_algo(
                    &der.as_bytes().into(),
                    &rcgen::PKCS_RSA_SHA256,
                )?)
            }
        }
    }
}

impl std::str::FromStr for KeyAlgorithm {
    type Err = String;

    /// kubeadm's names for them.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "ECDSA-P256" => Ok(KeyAlgorithm::EcdsaP256),
            "ECDSA-P384" => Ok(KeyAlgorithm::EcdsaP384),
            "RSA-2048" => Ok(KeyAlgorithm::Rsa(2048)),
            "RSA-3072" => Ok(KeyAlgorithm::Rsa(3072)),
            "RSA-4096" => Ok(KeyAlgorithm::Rsa(4096)),
            other => Err(format!(
                "unsupported value {other:?}: supported values are \"ECDSA-P256\", \"ECDSA-P384\", \"RSA-2048\", \"RSA-3072\", \"RSA-4096\""
            )),
        }
    }
}

/// How new certificates are made: their key, and how long leaves and CAs are valid (kubeadm's
/// `encryptionAlgorithm`, `certificateValidityPeriodDays`, `caCertificateValidityPeriodDays`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertificatePolicy {
    pub key: KeyAlgorithm,
    pub days: i64,
    pub ca_days: i64,
}

impl Default for CertificatePolicy {
    /// kubeadm's lifetimes: a year for leaves, ten for CAs.
    fn default() -> Self {
        CertificatePolicy {
            key: KeyAlgorithm::default(),
            days: 365,
            ca_days: 3650,
        }
    }
}

/// A private key as openssl, kubeadm and capictl write them: PKCS#8 (`PRIVATE KEY`), PKCS#1
/// RSA (`RSA PRIVATE KEY`, `openssl genrsa -traditional`, kubeadm's RSA keys) or SEC1 EC
/// (`EC PRIVATE KEY`, `openssl ecparam -genkey`). The signing backend reads PKCS#8 only, so
/// the other two are wrapped in a PKCS#8 envelope first.
pub fn key_pair_from_pem(pem: &str) -> Result<KeyPair, PkiError> {
    let key = PrivateKeyDer::from_pem_slice(pem.as_bytes())?;
    let pkcs8 = match &key {
        PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
        PrivateKeyDer::Pkcs1(k) => der::pkcs8(&der::rsa_algorithm(), k.secret_pkcs1_der()),
        PrivateKeyDer::Sec1(k) => {
            let curve = der::sec1_curve(k.secret_sec1_der()).ok_or_else(|| {
                PkiError::Key("an EC private key without its curve (parameters [0])".into())
            })?;
            der::pkcs8(&der::ec_algorithm(&curve), k.secret_sec1_der())
        }
        _ => return Err(PkiError::Key("an unknown private key format".into())),
    };
    KeyPair::try_from(pkcs8).map_err(|e| {
        PkiError::Key(format!(
            "{e}: capictl signs with ECDSA P-256 or P-384 keys and RSA keys of 2048 bits or more"
        ))
    })
}

/// The few DER structures needed to wrap a key in PKCS#8.
pub(crate) mod der {
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
    let tmp = path.with_extension("tmp");
    {
        let mut file = create_private(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Creates a new, empty file only its owner can read, to write a private file in parts. One
/// left at `path` is replaced: reopened, it would keep the mode it had.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |source| PkiError::Io {
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
    pub fn generate(common_name: &str) -> Result<Pki, PkiError> {
        Pki::generate_with(common_name, &CertificatePolicy::default())
    }

    /// A new CA with the policy's key and CA lifetime.
    pub fn generate_with(common_name: &str, policy: &CertificatePolicy) -> Result<Pki, PkiError> {
        let key = policy.key.generate()?;
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
        validity(&mut params, policy.ca_days);
        let cert = params.self_signed(&key)?;
        Ok(Pki {
            ca: KeyPairPem {
                cert: cert.pem(),
                key: key.serialize_pem(),
            },
        })
    }

    /// The CA in `dir` (`ca.crt`, `ca.key`), made on first use.
    pub fn load_or_create(dir: &Path) -> Result<Pki, PkiError> {
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
    ) -> Result<KeyPairPem, PkiError> {
        let policy = CertificatePolicy::default();
        self.issue_with(&policy, common_name, organizations, sans, usage)
    }

    /// A certificate the CA signs with the policy's key and lifetime.
    pub fn issue_with(
        &self,
        policy: &CertificatePolicy,
        common_name: &str,
        organizations: &[&str],
        sans: &[String],
        usage: Usage,
    ) -> Result<KeyPairPem, PkiError> {
        let ca_key = key_pair_from_pem(&self.ca.key)?;
        let issuer = Issuer::from_ca_cert_pem(&self.ca.cert, ca_key)?;
        let key = policy.key.generate()?;
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
        validity(&mut params, policy.days);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(KeyPairPem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// A serving certificate for these host names and addresses.
    pub fn serving_certificate(&self, hosts: &[String]) -> Result<KeyPairPem, PkiError> {
        self.issue("capictl-apiserver", &[], hosts, Usage::Server)
    }

    /// A client certificate: the user is the CN, the groups are the organizations.
    pub fn client_certificate(&self, user: &str, groups: &[&str]) -> Result<KeyPairPem, PkiError> {
        self.issue(user, groups, &[], Usage::Client)
    }
}

/// Accepts any certificate: a probe checks health, not identity.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS client configuration that trusts any server (probes only).
pub fn insecure_client_config() -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth()
}

/// `host:port`, with brackets around an IPv6 host.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Bytes as lowercase hex, as digests are written (`sha256:` hashes, kubelet's manifest hashes).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_made_by_openssl_sign_in_every_key_format() {
        crate::install_crypto_provider();
        for (what, cert, key) in [
            (
                "SEC1 EC (openssl ecparam -genkey)",
                include_str!("apiserver/testdata/ec-sec1.crt"),
                include_str!("apiserver/testdata/ec-sec1.key"),
            ),
            (
                "PKCS#1 RSA (openssl genrsa -traditional)",
                include_str!("apiserver/testdata/rsa-pkcs1.crt"),
                include_str!("apiserver/testdata/rsa-pkcs1.key"),
            ),
            (
                "PKCS#8 RSA (openssl pkcs8 -topk8)",
                include_str!("apiserver/testdata/rsa-pkcs1.crt"),
                include_str!("apiserver/testdata/rsa-pkcs8.key"),
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
            let leaf = CertificateDer::from_pem_slice(alice.cert.as_bytes()).unwrap();
            let authority = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
            let (_, authority) = x509_parser::parse_x509_certificate(authority.as_ref()).unwrap();
            let (tbs, _, _) = der::certificate_parts(leaf.as_ref()).unwrap();
            assert!(!tbs.is_empty(), "{what}");
            let (_, issued) = x509_parser::parse_x509_certificate(leaf.as_ref()).unwrap();
            assert_eq!(issued.issuer(), authority.subject(), "{what}");
        }
    }

    #[test]
    fn cas_and_leaves_of_every_kubeadm_algorithm_sign_and_verify() {
        crate::install_crypto_provider();
        for name in ["ECDSA-P256", "ECDSA-P384", "RSA-2048", "RSA-3072"] {
            let key: KeyAlgorithm = name.parse().unwrap();
            let policy = CertificatePolicy {
                key,
                days: 7,
                ca_days: 70,
            };
            let ca = Pki::generate_with("kubernetes", &policy).unwrap();
            // What the CA signs, rustls verifies: the leaf is usable for TLS as issued.
            let leaf = ca
                .issue_with(
                    &policy,
                    "kube-apiserver",
                    &[],
                    &["cp-1".into()],
                    Usage::Server,
                )
                .unwrap();
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(ca.ca.cert.as_bytes()).unwrap())
                .unwrap();
            let verifier = rustls::client::WebPkiServerVerifier::builder(Arc::new(roots))
                .build()
                .unwrap();
            let der = CertificateDer::from_pem_slice(leaf.cert.as_bytes()).unwrap();
            verifier
                .verify_server_cert(
                    &der,
                    &[],
                    &ServerName::try_from("cp-1").unwrap(),
                    &[],
                    UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
            let validity = parsed.validity();
            let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) / 86400;
            assert_eq!(days, 7, "{name}");
            // The key reads back as it was written, as a CA brought by the user would.
            key_pair_from_pem(&leaf.key).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let e = "RSA-1024".parse::<KeyAlgorithm>().unwrap_err();
        assert!(e.contains("RSA-1024") && e.contains("ECDSA-P384"), "{e}");
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

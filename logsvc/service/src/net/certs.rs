//! Certificates and the TLS side of the QUIC configs.
//!
//! A cluster has one CA. Every certificate it signs names the node ids its holder may
//! speak as, one DNS name each (`n<id>.nodes.tally.local`, [`node_name`]); a process
//! uses its certificate both as its server identity and as its client identity.
//! Servers require a client certificate signed by the CA and clients trust only the
//! CA, so a process outside the cluster can neither connect nor be connected to. Inside
//! it, identity is checked both ways: a dialer asks for the name of the node it means
//! to reach, and an acceptor checks that the hello's node id is one the dialer's
//! certificate names. A stolen certificate of a storage node cannot speak as the
//! controller.
//!
//! Two kinds of certificate sets:
//! - **dev** ([`Certs::generate`]): one leaf for every node of an in-process cluster,
//!   naming every node id (`*.nodes.tally.local`); the CA's key is dropped after
//!   signing and never written.
//! - **cluster** ([`ClusterCa`]): `tally cluster init` keeps the CA's key in the
//!   cluster directory and issues one leaf per node process with that process's ids.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::crypto::{CryptoError, HmacKey};
use quinn::TransportConfig;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::crypto::tls13::{Hkdf, OkmBlock};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use tally_log_core::{Error, NodeId, Result};

/// The domain of node names in certificates.
const NODES_DOMAIN: &str = "nodes.tally.local";
/// The application protocol, negotiated in the handshake so that a stray QUIC client
/// of another protocol fails there rather than on its first frame.
pub(super) const ALPN: &[u8] = b"tally/1";

const CA_FILE: &str = "ca.der";
const CERT_FILE: &str = "node.der";
const KEY_FILE: &str = "node.key.der";

/// The name a certificate must carry for its holder to speak as `node`.
pub fn node_name(node: NodeId) -> String {
    format!("n{}.{NODES_DOMAIN}", node.0)
}

/// Whether the leaf certificate `cert` (DER) names `node`. The signature was checked
/// by the TLS handshake; this checks only the name.
pub(super) fn certifies(cert: &CertificateDer<'_>, node: NodeId) -> bool {
    let Ok(leaf) = webpki::EndEntityCert::try_from(cert) else { return false };
    let Ok(name) = ServerName::try_from(node_name(node)) else { return false };
    leaf.verify_is_valid_for_subject_name(&name).is_ok()
}

/// A CA and the certificate it signed for one process. See the module docs.
pub struct Certs {
    ca: CertificateDer<'static>,
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl fmt::Debug for Certs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs.
        f.debug_struct("Certs").field("ca_bytes", &self.ca.len()).field("cert_bytes", &self.cert.len()).finish()
    }
}

fn transport_error<E: fmt::Display>(context: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Transport(format!("{context}: {e}"))
}

/// The parameters of a cluster's CA certificate. They are rebuilt from the cluster's
/// name when the CA is loaded, so the issuer named in the certificates it signs later
/// matches its certificate (the key identifier comes from the key).
fn ca_params(cluster: &str) -> Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(transport_error("ca parameters"))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, format!("tally cluster {cluster} ca"));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// A leaf for `names`, signed by `issuer`.
fn issue_leaf(issuer: &Issuer<'_, KeyPair>, holder: &str, names: Vec<String>) -> Result<(CertificateDer<'static>, KeyPair)> {
    let key = KeyPair::generate().map_err(transport_error("generating the node key"))?;
    let mut params = CertificateParams::new(names).map_err(transport_error("node parameters"))?;
    params.distinguished_name.push(DnType::CommonName, holder);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, issuer).map_err(transport_error("signing the node certificate"))?;
    Ok((cert.der().clone(), key))
}

/// A cluster's certificate authority, which `tally cluster init` keeps in the cluster
/// directory to issue each node process its certificate (and more, for nodes added
/// later).
pub struct ClusterCa {
    cluster: String,
    cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterCa").field("cluster", &self.cluster).finish_non_exhaustive()
    }
}

const CA_KEY_FILE: &str = "ca.key.der";
const CA_NAME_FILE: &str = "cluster";

impl ClusterCa {
    /// A new CA for the cluster named `cluster`.
    pub fn generate(cluster: &str) -> Result<ClusterCa> {
        let key = KeyPair::generate().map_err(transport_error("generating the ca key"))?;
        let params = ca_params(cluster)?;
        let cert = params.self_signed(&key).map_err(transport_error("self-signing the ca"))?;
        Ok(ClusterCa { cluster: cluster.to_string(), cert: cert.der().clone(), issuer: Issuer::new(params, key) })
    }

    /// Issues the certificate of the node process `holder`, which speaks as `ids`.
    pub fn issue(&self, holder: &str, ids: &[NodeId]) -> Result<Certs> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument(format!("a certificate for {holder} must name at least one node id")));
        }
        let (cert, key) = issue_leaf(&self.issuer, holder, ids.iter().map(|&n| node_name(n)).collect())?;
        Ok(Certs { ca: self.cert.clone(), cert, key: PrivatePkcs8KeyDer::from(key.serialize_der()) })
    }

    /// Issues a certificate for `holder` valid for `names` (DNS names or IP addresses),
    /// for a party that is not a node of the log: etcd's members, the command line.
    pub fn issue_for(&self, holder: &str, names: Vec<String>) -> Result<Certs> {
        let (cert, key) = issue_leaf(&self.issuer, holder, names)?;
        Ok(Certs { ca: self.cert.clone(), cert, key: PrivatePkcs8KeyDer::from(key.serialize_der()) })
    }

    /// Writes the CA's certificate, key (owner-readable only) and cluster name into
    /// `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let key = self.issuer.key().serialize_der();
        let files: [(&str, &[u8]); 3] =
            [(CA_FILE, self.cert.as_ref()), (CA_KEY_FILE, &key), (CA_NAME_FILE, self.cluster.as_bytes())];
        write_files(dir, &files)
    }

    /// Reads what [`ClusterCa::save`] wrote.
    pub fn load(dir: &Path) -> Result<ClusterCa> {
        let cert = CertificateDer::from(read_file(dir, CA_FILE)?);
        let key_der = PrivatePkcs8KeyDer::from(read_file(dir, CA_KEY_FILE)?);
        let key = KeyPair::try_from(&key_der).map_err(transport_error("reading the ca key"))?;
        let cluster = String::from_utf8(read_file(dir, CA_NAME_FILE)?)
            .map_err(|_| Error::Transport(format!("{} is not utf-8", dir.join(CA_NAME_FILE).display())))?;
        let issuer = Issuer::new(ca_params(&cluster)?, key);
        Ok(ClusterCa { cluster, cert, issuer })
    }
}

/// `der` as PEM (RFC 7468): base64 in lines of 64, between BEGIN and END lines.
fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            b64.push(if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ascii"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn read_file(dir: &Path, name: &str) -> Result<Vec<u8>> {
    let path = dir.join(name);
    fs::read(&path).map_err(|e| Error::Transport(format!("reading {}: {e}", path.display())))
}

/// Writes `files` into `dir`, creating it, each readable by its owner only.
fn write_files(dir: &Path, files: &[(&str, &[u8])]) -> Result<()> {
    let io_error = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| Error::Transport(format!("writing {path}: {e}"))
    };
    fs::create_dir_all(dir).map_err(io_error(dir))?;
    for (name, bytes) in files {
        let path = dir.join(name);
        write_private(&path, bytes).map_err(io_error(&path))?;
    }
    Ok(())
}

impl Certs {
    /// A fresh dev set: a CA whose key is dropped, and one leaf that names every node
    /// id, shared by every node of an in-process cluster.
    pub fn generate() -> Result<Certs> {
        let ca_key = KeyPair::generate().map_err(transport_error("generating the ca key"))?;
        let params = ca_params("dev")?;
        let ca = params.self_signed(&ca_key).map_err(transport_error("self-signing the ca"))?;
        let issuer = Issuer::new(params, ca_key);
        let (cert, key) = issue_leaf(&issuer, "tally dev node", vec![format!("*.{NODES_DOMAIN}")])?;
        Ok(Certs { ca: ca.der().clone(), cert, key: PrivatePkcs8KeyDer::from(key.serialize_der()) })
    }

    /// Writes the CA certificate, the leaf certificate and the leaf key as DER files
    /// into `dir`, creating it. The key file is readable by its owner only.
    pub fn save(&self, dir: &Path) -> Result<()> {
        write_files(dir, &[(CA_FILE, self.ca.as_ref()), (CERT_FILE, self.cert.as_ref()), (KEY_FILE, self.key.secret_pkcs8_der())])
    }

    /// The CA's certificate, the leaf's and the leaf's key (PKCS#8), in PEM, as etcd
    /// and its clients take them.
    pub fn pem(&self) -> (String, String, String) {
        (
            pem("CERTIFICATE", self.ca.as_ref()),
            pem("CERTIFICATE", self.cert.as_ref()),
            pem("PRIVATE KEY", self.key.secret_pkcs8_der()),
        )
    }

    /// Reads what [`Certs::save`] wrote, and checks that it makes a usable identity.
    pub fn load(dir: &Path) -> Result<Certs> {
        let certs = Certs {
            ca: CertificateDer::from(read_file(dir, CA_FILE)?),
            cert: CertificateDer::from(read_file(dir, CERT_FILE)?),
            key: PrivatePkcs8KeyDer::from(read_file(dir, KEY_FILE)?),
        };
        certs.server_config(Arc::default())?;
        certs.client_config(Arc::default())?;
        Ok(certs)
    }

    /// Loads the certificates in `dir`, or generates and saves them if there are none,
    /// so a restarted dev cluster keeps trusting itself.
    ///
    /// Nodes of one dev cluster may start together on the same `dir`: a new set is
    /// written into a private directory that is then renamed to `dir`, so exactly one set
    /// lands and the nodes that lose the race load the winner's.
    pub fn load_or_generate(dir: &Path) -> Result<Certs> {
        if dir.join(KEY_FILE).exists() {
            let certs = Certs::load(dir)?;
            // A dev set written before certificates named node ids names none; such a
            // set only ever served this directory's own nodes, so it is replaced.
            if certifies(&certs.cert, NodeId(0)) {
                return Ok(certs);
            }
            let _ = fs::remove_file(dir.join(KEY_FILE));
            return Certs::load_or_generate(dir);
        }
        let certs = Certs::generate()?;
        let staging = staging_dir(dir);
        certs.save(&staging)?;
        // Renaming a directory onto an empty directory replaces it, onto a non-empty one
        // fails: that is the atomic create-if-absent the race needs.
        let renamed = fs::rename(&staging, dir);
        if renamed.is_ok() {
            return Ok(certs);
        }
        // Best effort: the staging directory only holds a copy of certificates we drop.
        let _ = fs::remove_dir_all(&staging);
        if dir.join(KEY_FILE).exists() {
            return Certs::load(dir);
        }
        // `dir` holds other files and no certificates: nobody else is writing ours.
        certs.save(dir)?;
        Ok(certs)
    }

    fn roots(&self) -> Result<Arc<RootCertStore>> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.clone()).map_err(transport_error("adding the dev ca to the trusted roots"))?;
        Ok(Arc::new(roots))
    }

    /// Accepts only clients whose certificate the dev CA signed.
    pub(super) fn server_config(&self, transport: Arc<TransportConfig>) -> Result<quinn::ServerConfig> {
        let provider = provider();
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots()?, provider.clone())
            .build()
            .map_err(transport_error("client certificate verifier"))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(transport_error("tls versions"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![self.cert.clone()], self.key.clone_key().into())
            .map_err(transport_error("tls server config"))?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let quic = QuicServerConfig::try_from(tls).map_err(transport_error("quic server crypto"))?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
        config.transport_config(transport);
        Ok(config)
    }

    /// Trusts only the dev CA and presents the shared leaf as the client identity.
    pub(super) fn client_config(&self, transport: Arc<TransportConfig>) -> Result<quinn::ClientConfig> {
        let mut tls = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(transport_error("tls versions"))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(vec![self.cert.clone()], self.key.clone_key().into())
            .map_err(transport_error("tls client config"))?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let quic = QuicClientConfig::try_from(tls).map_err(transport_error("quic client crypto"))?;
        let mut config = quinn::ClientConfig::new(Arc::new(quic));
        config.transport_config(transport);
        Ok(config)
    }

    /// The key of node `me`'s QUIC stateless-reset tokens.
    ///
    /// QUIC lets an endpoint that lost a connection's state tell the peer so with a
    /// token only the connection's original endpoint could compute. Deriving the key
    /// from the cluster secret and the node id, rather than drawing it at random as
    /// quinn does, gives a node restarted at the same address the same tokens: its
    /// peers' next packet on a connection to the old process is answered with a reset
    /// that closes it at once, instead of vanishing until the idle timeout.
    pub(super) fn reset_key(&self, me: NodeId) -> Arc<dyn HmacKey> {
        Arc::new(ResetKey::new(self.key.secret_pkcs8_der(), me))
    }

    /// The CA's certificate, for tests that build their own TLS configs.
    #[cfg(test)]
    pub(super) fn ca(&self) -> CertificateDer<'static> {
        self.ca.clone()
    }

    /// The shared leaf and its key, for tests that build their own TLS configs.
    #[cfg(test)]
    pub(super) fn identity(&self) -> (CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
        (self.cert.clone(), self.key.clone_key())
    }
}

/// An explicit provider rather than the process default: which crypto backend is
/// installed as default is a decision of the binary, not of this library.
pub(super) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// HMAC-SHA256 under a key derived from a secret and a node id, with the HKDF of
/// rustls's ring provider (quinn's own HMAC type is not reachable without depending on
/// ring directly).
struct ResetKey {
    hkdf: &'static dyn Hkdf,
    key: OkmBlock,
}

impl ResetKey {
    const SALT: &'static [u8] = b"tally quic stateless reset v1";
    const TAG_LEN: usize = 32;

    fn new(secret: &[u8], me: NodeId) -> ResetKey {
        let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256.tls13().expect("a tls 1.3 suite");
        let hkdf = suite.hkdf_provider;
        let key = hkdf.extract_from_secret(Some(Self::SALT), secret).expand_block(&[&me.0.to_be_bytes()]);
        ResetKey { hkdf, key }
    }
}

impl HmacKey for ResetKey {
    fn sign(&self, data: &[u8], signature_out: &mut [u8]) {
        signature_out.copy_from_slice(self.hkdf.hmac_sign(&self.key, data).as_ref());
    }

    fn signature_len(&self) -> usize {
        Self::TAG_LEN
    }

    fn verify(&self, data: &[u8], signature: &[u8]) -> Result<(), CryptoError> {
        let expected = self.hkdf.hmac_sign(&self.key, data);
        let expected = expected.as_ref();
        // Compares every byte whatever differs first, so timing tells nothing.
        let diff = expected.iter().zip(signature).fold(0, |acc, (a, b)| acc | (a ^ b));
        if expected.len() == signature.len() && diff == 0 {
            Ok(())
        } else {
            Err(CryptoError)
        }
    }
}

/// A sibling of `dir` that no other process picks.
fn staging_dir(dir: &Path) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    dir.with_file_name(format!(".{name}.staging-{}-{nanos}", std::process::id()))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn pem_is_base64_in_lines_of_64() {
        assert_eq!(pem("X", b""), "-----BEGIN X-----\n-----END X-----\n");
        assert_eq!(pem("X", b"foobar"), "-----BEGIN X-----\nZm9vYmFy\n-----END X-----\n");
        assert_eq!(pem("X", b"fo"), "-----BEGIN X-----\nZm8=\n-----END X-----\n");
        let long = pem("X", &[0xff; 60]);
        let lines: Vec<&str> = long.lines().collect();
        assert_eq!((lines.len(), lines[1].len(), lines[2]), (4, 64, "////////////////"));
    }

    #[test]
    fn saved_certificates_load_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::generate().unwrap();
        certs.save(dir.path()).unwrap();
        let loaded = Certs::load(dir.path()).unwrap();
        assert_eq!((loaded.ca, loaded.cert), (certs.ca, certs.cert));
        assert_eq!(loaded.key.secret_pkcs8_der(), certs.key.secret_pkcs8_der());
    }

    #[test]
    fn load_or_generate_generates_once_then_reuses() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("certs");
        let first = Certs::load_or_generate(&dir).unwrap();
        let second = Certs::load_or_generate(&dir).unwrap();
        assert_eq!(first.ca, second.ca);
        assert_eq!(first.cert, second.cert);
        // No staging directory is left behind.
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 1);

        // An existing empty directory is filled too.
        let empty = tempfile::tempdir().unwrap();
        let third = Certs::load_or_generate(empty.path()).unwrap();
        assert_eq!(Certs::load(empty.path()).unwrap().cert, third.cert);
    }

    #[test]
    fn reset_keys_depend_on_the_secret_and_the_node_only() {
        let certs = Certs::generate().unwrap();
        let other = Certs::generate().unwrap();
        let sign = |key: Arc<dyn HmacKey>| {
            let mut out = vec![0; key.signature_len()];
            key.sign(b"connection id", &mut out);
            out
        };
        let n1 = sign(certs.reset_key(NodeId(1)));
        assert_eq!(n1, sign(certs.reset_key(NodeId(1))), "a restarted node signs alike");
        assert_ne!(n1, sign(certs.reset_key(NodeId(2))));
        assert_ne!(n1, sign(other.reset_key(NodeId(1))));
        let key = certs.reset_key(NodeId(1));
        assert!(key.verify(b"connection id", &n1).is_ok());
        assert!(key.verify(b"connection id", &n1[..31]).is_err());
        let mut flipped = n1.clone();
        flipped[31] ^= 1;
        assert!(key.verify(b"connection id", &flipped).is_err());
    }

    #[test]
    fn corrupt_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        Certs::generate().unwrap().save(dir.path()).unwrap();
        fs::write(dir.path().join(KEY_FILE), b"not a key").unwrap();
        assert!(matches!(Certs::load(dir.path()), Err(Error::Transport(_))));
        fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        assert!(matches!(Certs::load(dir.path()), Err(Error::Transport(_))));
    }

    #[cfg(unix)]
    #[test]
    fn key_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        Certs::generate().unwrap().save(dir.path()).unwrap();
        let mode = fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "key file mode {mode:o}");
    }
}

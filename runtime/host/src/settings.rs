//! A function's settings: values set at deploy and changed later with `tally config`,
//! some of them secrets, which guests read through `wasi:config/store` and
//! `wasi:cli/environment` (`host/settings.rs`).
//!
//! ```text
//!   registry book, tag MANIFESTS (registry.rs)
//!     {"op":"deploy", .., "config": {K: {"plain": V} | {"secret": hex(nonce ‖ sealed V)}}}
//!     {"op":"config", name, set: {..}, unset: [K..]}     a change, without a redeploy
//!     {"op":"delete", name}                              forgets every setting
//! ```
//!
//! Every change is a version, named by its manifest's seqnum (0: no settings). A node
//! keeps every version of every function (they are small, and changes are rare), so that a
//! re-execution reads the version its first execution read: the host asks the exactly-once
//! core for the version to read (`Attempt::settings_version`, a reading logged as clocks
//! are) with the current one as the live value.
//!
//! Secrets are sealed with ChaCha20-Poly1305 under the node's secrets key (a file outside
//! the log: `[node] secrets_key_file`; every node of a cluster has the same), with the
//! function's name and the key's as associated data, so a sealed value copied to another
//! function or key does not open. A listing shows that a secret is set, never its value;
//! nothing logs values. A node without the key (or with another one) cannot set secrets,
//! and its guests get an error for a secret they read.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use tally_durable::{Error as RuntimeError, Result};

/// Settings of one function at most.
pub const SETTINGS_MAX: usize = 256;
/// Bytes of one value at most.
pub const VALUE_BYTES_MAX: usize = 32 << 10;
/// Bytes of all of one function's keys and values at most (they travel in one record).
pub const SETTINGS_BYTES_MAX: usize = 256 << 10;

/// A setting as a manifest carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stored {
    Plain(String),
    /// Hex of the nonce and the sealed value.
    Secret(String),
}

/// A setting as a deploy or a change gives it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Setting {
    pub value: String,
    #[serde(default)]
    pub secret: bool,
}

impl std::fmt::Debug for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.secret {
            f.write_str("Setting(secret)")
        } else {
            write!(f, "Setting({:?})", self.value)
        }
    }
}

/// One value as a guest reads it: `Err` for a secret this node cannot open.
pub type Opened = std::result::Result<String, String>;

/// One version of a function's settings, opened.
#[derive(Default)]
pub struct Values {
    pub values: BTreeMap<String, Opened>,
}

impl std::fmt::Debug for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

/// A setting as a listing shows it: a secret's value never.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listed {
    pub key: String,
    pub secret: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A function's settings as the API lists them.
#[derive(Clone, Debug, Serialize)]
pub struct Listing {
    /// The version: the registry's seqnum of the last change, 0 for none.
    pub version: u64,
    pub settings: Vec<Listed>,
}

/// Keys: 1 to 128 of `A-Z a-z 0-9 _ . -`, as environment variable names and
/// `wasi:config` keys both take them.
pub fn check_key(key: &str) -> Result<()> {
    let ok =
        !key.is_empty() && key.len() <= 128 && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::InvalidArgument(format!(
            "invalid setting key {key:?}: use 1 to 128 of A-Z, a-z, 0-9, '_', '.' and '-'"
        )))
    }
}

/// The node's key for secrets.
pub struct SecretsKey {
    key: LessSafeKey,
}

impl SecretsKey {
    /// The key in `path` (64 hex digits), made there (mode 0600) if the file is missing.
    pub fn load_or_create(path: &Path) -> anyhow::Result<SecretsKey> {
        use anyhow::Context as _;
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                SystemRandom::new().fill(&mut bytes).map_err(|_| anyhow::anyhow!("no system randomness"))?;
                let text = hex(&bytes);
                write_private(path, &text).with_context(|| format!("writing the secrets key {}", path.display()))?;
                text
            }
            Err(e) => return Err(e).with_context(|| format!("reading the secrets key {}", path.display())),
        };
        let bytes = unhex(text.trim())
            .filter(|b| b.len() == 32)
            .with_context(|| format!("{} does not hold a secrets key (64 hex digits)", path.display()))?;
        SecretsKey::new(&bytes)
    }

    pub fn new(bytes: &[u8]) -> anyhow::Result<SecretsKey> {
        let key = UnboundKey::new(&CHACHA20_POLY1305, bytes).map_err(|_| anyhow::anyhow!("a secrets key is 32 bytes"))?;
        Ok(SecretsKey { key: LessSafeKey::new(key) })
    }

    fn aad(function: &str, key: &str) -> Vec<u8> {
        [b"tally-secret\0", function.as_bytes(), b"\0", key.as_bytes()].concat()
    }

    fn seal(&self, function: &str, key: &str, value: &str) -> Result<String> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| RuntimeError::Internal("no system randomness".into()))?;
        let mut sealed = value.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(Self::aad(function, key)), &mut sealed)
            .map_err(|_| RuntimeError::Internal("sealing a secret failed".into()))?;
        Ok(hex(&[&nonce[..], &sealed].concat()))
    }

    fn open(&self, function: &str, key: &str, sealed: &str) -> Option<String> {
        let mut bytes = unhex(sealed)?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let nonce = Nonce::try_assume_unique_for_key(&bytes[..NONCE_LEN]).ok()?;
        let opened = self.key.open_in_place(nonce, Aad::from(Self::aad(function, key)), &mut bytes[NONCE_LEN..]).ok()?;
        String::from_utf8(opened.to_vec()).ok()
    }
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    // Hex digits only: `from_str_radix` would take a sign (`+e`), which no sealing has.
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// One version as kept: what the manifests said (for listings) and the values opened.
struct Version {
    seqnum: u64,
    stored: BTreeMap<String, Stored>,
    values: Arc<Values>,
}

/// Every function's settings, every version.
pub struct Settings {
    key: Option<SecretsKey>,
    functions: RwLock<HashMap<String, Vec<Version>>>,
}

impl Settings {
    pub fn new(key: Option<SecretsKey>) -> Settings {
        Settings { key, functions: RwLock::new(HashMap::new()) }
    }

    /// Checks a change of `function`'s settings against the current ones and the bounds,
    /// and seals its secrets: what the manifest carries.
    pub fn seal(&self, function: &str, set: &BTreeMap<String, Setting>, unset: &[String]) -> Result<BTreeMap<String, Stored>> {
        let mut after: BTreeMap<String, usize> =
            self.current_stored(function).iter().map(|(k, v)| (k.clone(), stored_len(v))).collect();
        for key in unset {
            check_key(key)?;
            after.remove(key);
        }
        let mut sealed = BTreeMap::new();
        for (key, setting) in set {
            check_key(key)?;
            if setting.value.len() > VALUE_BYTES_MAX {
                return Err(RuntimeError::InvalidArgument(format!(
                    "the value of {key:?} is {} bytes, more than the limit of {VALUE_BYTES_MAX}",
                    setting.value.len()
                )));
            }
            let stored = if setting.secret {
                let Some(k) = &self.key else {
                    return Err(RuntimeError::InvalidArgument(
                        "this node has no secrets key ([node] secrets_key_file), so it cannot keep secrets".into(),
                    ));
                };
                Stored::Secret(k.seal(function, key, &setting.value)?)
            } else {
                Stored::Plain(setting.value.clone())
            };
            after.insert(key.clone(), stored_len(&stored));
            sealed.insert(key.clone(), stored);
        }
        if after.len() > SETTINGS_MAX {
            return Err(RuntimeError::InvalidArgument(format!(
                "a function has at most {SETTINGS_MAX} settings; this change would make {}",
                after.len()
            )));
        }
        let bytes: usize = after.iter().map(|(k, v)| k.len() + v).sum();
        if bytes > SETTINGS_BYTES_MAX {
            return Err(RuntimeError::InvalidArgument(format!(
                "a function's settings hold at most {SETTINGS_BYTES_MAX} bytes; this change would make {bytes}"
            )));
        }
        Ok(sealed)
    }

    fn current_stored(&self, function: &str) -> BTreeMap<String, Stored> {
        let functions = self.functions.read().expect("not poisoned");
        functions.get(function).and_then(|v| v.last()).map(|v| v.stored.clone()).unwrap_or_default()
    }

    /// Applies a change logged at `seqnum`: the next version of `function`'s settings.
    pub fn apply(&self, function: &str, seqnum: u64, set: BTreeMap<String, Stored>, unset: &[String]) {
        let mut stored = self.current_stored(function);
        for key in unset {
            stored.remove(key);
        }
        stored.extend(set);
        self.push(function, seqnum, stored);
    }

    /// Forgets `function`'s settings from `seqnum` on (a delete).
    pub fn clear(&self, function: &str, seqnum: u64) {
        if !self.current_stored(function).is_empty() {
            self.push(function, seqnum, BTreeMap::new());
        }
    }

    fn push(&self, function: &str, seqnum: u64, stored: BTreeMap<String, Stored>) {
        let values = stored
            .iter()
            .map(|(key, s)| {
                let opened = match s {
                    Stored::Plain(v) => Ok(v.clone()),
                    Stored::Secret(sealed) => match self.key.as_ref().and_then(|k| k.open(function, key, sealed)) {
                        Some(v) => Ok(v),
                        None if self.key.is_none() => {
                            Err(format!("the secret {key:?} cannot be read: this node has no secrets key"))
                        }
                        None => Err(format!("the secret {key:?} cannot be opened with this node's secrets key")),
                    },
                };
                (key.clone(), opened)
            })
            .collect();
        let version = Version { seqnum, stored, values: Arc::new(Values { values }) };
        let mut functions = self.functions.write().expect("not poisoned");
        let versions = functions.entry(function.to_string()).or_default();
        if versions.last().is_none_or(|v| v.seqnum < seqnum) {
            versions.push(version);
        }
    }

    /// The current version of `function`'s settings: 0 for none.
    pub fn current(&self, function: &str) -> u64 {
        let functions = self.functions.read().expect("not poisoned");
        functions.get(function).and_then(|v| v.last()).map_or(0, |v| v.seqnum)
    }

    /// Version `seqnum` of `function`'s settings, if this node has read it (0: none).
    pub fn at(&self, function: &str, seqnum: u64) -> Option<Arc<Values>> {
        if seqnum == 0 {
            return Some(Arc::new(Values::default()));
        }
        let functions = self.functions.read().expect("not poisoned");
        let versions = functions.get(function)?;
        let i = versions.binary_search_by_key(&seqnum, |v| v.seqnum).ok()?;
        Some(versions[i].values.clone())
    }

    /// `function`'s current settings, secrets without their values.
    pub fn list(&self, function: &str) -> Listing {
        let functions = self.functions.read().expect("not poisoned");
        let Some(current) = functions.get(function).and_then(|v| v.last()) else {
            return Listing { version: 0, settings: Vec::new() };
        };
        let settings = current
            .stored
            .iter()
            .map(|(key, s)| match s {
                Stored::Plain(v) => Listed { key: key.clone(), secret: false, value: Some(v.clone()) },
                Stored::Secret(_) => Listed { key: key.clone(), secret: true, value: None },
            })
            .collect();
        Listing { version: current.seqnum, settings }
    }
}

fn stored_len(s: &Stored) -> usize {
    match s {
        Stored::Plain(v) | Stored::Secret(v) => v.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(value: &str, secret: bool) -> Setting {
        Setting { value: value.into(), secret }
    }

    fn settings() -> Settings {
        Settings::new(Some(SecretsKey::new(&[7; 32]).unwrap()))
    }

    /// Found by the `secrets` fuzz target: a pair with a sign (`+e`) read as a byte.
    #[test]
    fn a_sealing_is_hex_digits_only() {
        assert_eq!(unhex("0eFF"), Some(vec![0x0e, 0xff]));
        for bad in ["+e", "-1", " e", "0", "zz"] {
            assert_eq!(unhex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn versions_are_kept_and_secrets_are_sealed_to_their_function_and_key() {
        let s = settings();
        let set =
            BTreeMap::from([("url".to_string(), setting("http://x", false)), ("token".to_string(), setting("hunter2", true))]);
        let sealed = s.seal("f", &set, &[]).unwrap();
        let Stored::Secret(ciphertext) = &sealed["token"] else { panic!("{sealed:?}") };
        assert!(!ciphertext.contains(&hex(b"hunter2")), "the value is sealed");
        s.apply("f", 10, sealed.clone(), &[]);
        assert_eq!(s.current("f"), 10);
        assert_eq!(s.at("f", 10).unwrap().values["token"], Ok("hunter2".to_string()));
        // A listing shows the secret is set, never its value.
        let listed = serde_json::to_string(&s.list("f")).unwrap();
        assert!(!listed.contains("hunter2") && listed.contains(r#"{"key":"token","secret":true}"#), "{listed}");
        // The sealed value copied to another function or key does not open.
        s.apply("g", 11, BTreeMap::from([("token".to_string(), sealed["token"].clone())]), &[]);
        s.apply("f", 12, BTreeMap::from([("other".to_string(), sealed["token"].clone())]), &["url".to_string()]);
        assert!(s.at("g", 11).unwrap().values["token"].is_err());
        let v12 = s.at("f", 12).unwrap();
        assert!(v12.values["other"].is_err());
        assert!(!v12.values.contains_key("url"));
        // Older versions stay readable; unknown ones are not made up.
        assert_eq!(s.at("f", 10).unwrap().values["url"], Ok("http://x".to_string()));
        assert!(s.at("f", 11).is_none());
        assert!(s.at("f", 0).unwrap().values.is_empty());
        // A delete forgets them; another key cannot open them.
        s.clear("f", 20);
        assert_eq!(s.current("f"), 20);
        assert!(s.list("f").settings.is_empty());
        let other = Settings::new(Some(SecretsKey::new(&[8; 32]).unwrap()));
        other.apply("f", 10, sealed, &[]);
        let error = other.at("f", 10).unwrap().values["token"].clone().unwrap_err();
        assert!(error.contains("cannot be opened") && !error.contains("hunter2"), "{error}");
    }

    #[test]
    fn changes_are_checked() {
        let s = settings();
        let one = |k: &str, v: &str, secret| BTreeMap::from([(k.to_string(), setting(v, secret))]);
        assert!(s.seal("f", &one("a b", "x", false), &[]).is_err());
        assert!(s.seal("f", &one("", "x", false), &[]).is_err());
        assert!(s.seal("f", &one("A_b.c-9", "x", false), &[]).is_ok());
        assert!(s.seal("f", &one("k", &"x".repeat(VALUE_BYTES_MAX + 1), false), &[]).is_err());
        let many: BTreeMap<String, Setting> = (0..=SETTINGS_MAX).map(|i| (format!("k{i}"), setting("v", false))).collect();
        assert!(s.seal("f", &many, &[]).is_err());
        let big: BTreeMap<String, Setting> =
            (0..10).map(|i| (format!("k{i}"), setting(&"x".repeat(VALUE_BYTES_MAX), false))).collect();
        assert!(s.seal("f", &big, &[]).unwrap_err().to_string().contains("at most"));
        let keyless = Settings::new(None);
        assert!(keyless.seal("f", &one("k", "v", true), &[]).unwrap_err().to_string().contains("secrets key"));
        assert!(format!("{:?}", setting("hunter2", true)) == "Setting(secret)");
    }

    #[test]
    fn a_key_file_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/secrets.key");
        let a = SecretsKey::load_or_create(&path).unwrap();
        let sealed = a.seal("f", "k", "v").unwrap();
        let b = SecretsKey::load_or_create(&path).unwrap();
        assert_eq!(b.open("f", "k", &sealed).as_deref(), Some("v"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        std::fs::write(dir.path().join("bad.key"), "xyz").unwrap();
        assert!(SecretsKey::load_or_create(&dir.path().join("bad.key")).is_err());
    }
}

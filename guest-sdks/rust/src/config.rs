//! The function's settings: the values given at deploy (`tally deploy --config K=V
//! --secret K=V`) or later with `tally config set`, read through `wasi:config/store`.
//!
//! Secrets are read like any other value; keep them out of logs, errors and responses.
//! A re-execution of an invocation reads what its first execution read, so a setting
//! changed meanwhile does not change the course of an invocation already under way.
//! The same values are the function's environment variables (`std::env::var`).
//!
//! ```no_run
//! use tally_sdk::config;
//!
//! let upstream = config::get("upstream")?.unwrap_or_else(|| "http://127.0.0.1:9000".into());
//! for (key, _value) in config::get_all()? {
//!     println!("setting {key}");
//! }
//! # Ok::<(), tally_sdk::Error>(())
//! ```

#[cfg(not(test))]
use crate::bindings::wasi::config::store as wit;
use crate::bindings::wasi::config::store::Error as WitError;
#[cfg(test)]
use crate::fake::config_store as wit;
use crate::{Error, Result};

/// The value of setting `key`, or `None` if the function has no such setting.
pub fn get(key: &str) -> Result<Option<String>> {
    wit::get(key).map_err(from_wit)
}

/// Every setting of the function, as (key, value) pairs.
pub fn get_all() -> Result<Vec<(String, String)>> {
    wit::get_all().map_err(from_wit)
}

/// The store's errors say that the settings could not be read right now, which is
/// what [`Error::Unavailable`] means; a variant of their own would put a second error
/// type in front of every caller for a failure the host does not produce today.
fn from_wit(error: WitError) -> Error {
    let message = match error {
        WitError::Upstream(message) => message,
        WitError::Io(message) => message,
    };
    Error::Unavailable(format!("settings: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake;

    #[test]
    fn get_reads_one_setting() {
        fake::reply(Ok::<_, WitError>(Some("http://127.0.0.1:9000/sink".to_owned())));
        fake::reply(Ok::<Option<String>, WitError>(None));
        assert_eq!(get("upstream"), Ok(Some("http://127.0.0.1:9000/sink".into())));
        assert_eq!(get("absent"), Ok(None));
        assert_eq!(fake::calls(), ["config_store.get(\"upstream\")", "config_store.get(\"absent\")"]);
    }

    #[test]
    fn get_all_reads_every_setting() {
        let all = vec![("a".to_owned(), "1".to_owned()), ("b".to_owned(), "2".to_owned())];
        fake::reply(Ok::<_, WitError>(all.clone()));
        assert_eq!(get_all(), Ok(all));
        assert_eq!(fake::calls(), ["config_store.get_all()"]);
    }

    #[test]
    fn store_errors_are_unavailable() {
        fake::reply(Err::<Option<String>, _>(WitError::Io("disk".into())));
        fake::reply(Err::<Vec<(String, String)>, _>(WitError::Upstream("down".into())));
        assert_eq!(get("k"), Err(Error::Unavailable("settings: disk".into())));
        assert_eq!(get_all(), Err(Error::Unavailable("settings: down".into())));
        assert_eq!(fake::calls(), ["config_store.get(\"k\")", "config_store.get_all()"]);
    }
}

//! `wasi:config/store` and `wasi:cli/environment`: the function's settings
//! (`crate::settings`), one version per execution, the same in every execution of an
//! invocation. The first read asks the invocation's attempt which version to read (a
//! reading logged as clocks are, with the registry's current version as the live value)
//! and keeps it for the rest of the execution.
//!
//! The environment holds every setting that this node can read, secrets included, as a
//! process's environment would; `wasi:config/store` fails for a secret this node cannot
//! open. The environment definition shadows wasmtime-wasi's (which holds nothing).

use std::sync::Arc;

use tally_durable::{BoxFuture, Result};
use wasmtime::component::Linker;
use wasmtime::StoreContextMut;

use super::wasi::config::store::{Error, Host};
use super::HostState;
use crate::settings::Values;

/// Where an instance reads its function's settings (the registry).
pub trait SettingsSource: Send + Sync {
    /// The current version of `function`'s settings on this node (0: none).
    fn current(&self, function: &str) -> u64;
    /// Version `version` of `function`'s settings.
    fn at<'a>(&'a self, function: &'a str, version: u64) -> BoxFuture<'a, Result<Arc<Values>>>;
}

impl HostState {
    /// The settings this execution reads.
    async fn settings(&mut self) -> std::result::Result<Arc<Values>, String> {
        if let Some(values) = &self.settings {
            return Ok(values.clone());
        }
        let inv = self.inv();
        let source = inv.settings.clone();
        let function = inv.attempt.version.name.clone();
        let version = inv.attempt.settings_version(source.current(&function));
        let values = source.at(&function, version).await.map_err(|e| format!("the function's settings: {e}"))?;
        self.settings = Some(values.clone());
        Ok(values)
    }
}

impl Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<std::result::Result<Option<String>, Error>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostConfig, || "get".to_string());
        let values = match self.settings().await {
            Ok(v) => v,
            Err(e) => return Ok(Err(Error::Upstream(e))),
        };
        Ok(match values.values.get(&key) {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(v.clone())),
            Some(Err(why)) => Err(Error::Upstream(why.clone())),
        })
    }

    async fn get_all(&mut self) -> wasmtime::Result<std::result::Result<Vec<(String, String)>, Error>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostConfig, || "get_all".to_string());
        let values = match self.settings().await {
            Ok(v) => v,
            Err(e) => return Ok(Err(Error::Upstream(e))),
        };
        let mut all = Vec::with_capacity(values.values.len());
        for (key, value) in &values.values {
            match value {
                Ok(v) => all.push((key.clone(), v.clone())),
                Err(why) => return Ok(Err(Error::Upstream(why.clone()))),
            }
        }
        Ok(Ok(all))
    }
}

/// Defines `wasi:cli/environment`'s `get-environment` over wasmtime-wasi's, which must be
/// in `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut environment = linker.instance(&format!("wasi:cli/environment@{}", super::recorded::WASI))?;
    environment.func_wrap_async("get-environment", |mut store: StoreContextMut<'_, HostState>, (): ()| {
        Box::new(async move {
            let values = match store.data_mut().settings().await {
                Ok(values) => values,
                Err(e) => wasmtime::bail!("{e}"),
            };
            let vars: Vec<(String, String)> =
                values.values.iter().filter_map(|(k, v)| Some((k.clone(), v.as_ref().ok()?.clone()))).collect();
            Ok((vars,))
        })
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

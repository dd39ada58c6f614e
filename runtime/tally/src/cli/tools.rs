//! The guest toolchains `tally build` runs: found on PATH, or installed by tally into the
//! tools directory at pinned versions where a registry ships them (PyPI, npm). What it
//! cannot install (Go, clang for wasm, rustup's targets aside) it names, with the
//! command that installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use super::sdk::tools_dir;

/// componentize-py, from PyPI: Python guests.
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// componentize-js, from npm: JavaScript and TypeScript guests.
pub const COMPONENTIZE_JS: &str = "0.23.0";
/// esbuild, from npm: bundles a JavaScript or TypeScript project with the SDK.
pub const ESBUILD: &str = "0.28.2";

/// The oldest Go with `//go:wasmexport` and `-buildmode=c-shared` for wasip1.
const GO_MIN: (u32, u32) = (1, 24);

/// A program on PATH, or `None`.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// Adds a rustup target for the toolchain the project uses, if it is missing.
pub fn rust_target(dir: &Path, target: &str) -> anyhow::Result<()> {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).current_dir(dir).output();
    match installed {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == target) => Ok(()),
        Ok(_) => {
            eprintln!("tally build: adding the {target} target");
            let status = Command::new("rustup").args(["target", "add", target]).current_dir(dir).status()?;
            if !status.success() {
                bail!("rustup target add {target} failed");
            }
            Ok(())
        }
        Err(e) => {
            eprintln!("tally build: rustup not found ({e}); assuming {target} is installed");
            Ok(())
        }
    }
}

/// A program and the environment it runs in.
pub struct Tool {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, PathBuf)>,
}

impl Tool {
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }
}

/// Installs into `dir` with `install` unless `ready` says it is there: into a staging
/// directory renamed into place, so a failed or concurrent install never leaves half a
/// tool behind.
fn installed(
    dir: &Path,
    what: &str,
    ready: impl Fn(&Path) -> bool,
    install: impl Fn(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if ready(dir) {
        return Ok(());
    }
    eprintln!("tally build: installing {what} into {} (once)", dir.display());
    let parent = dir.parent().context("the tools directory has a parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = parent.join(format!(".{}-{}", dir.file_name().and_then(|n| n.to_str()).unwrap_or("tool"), std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    install(&staging)?;
    if !ready(&staging) {
        bail!("installing {what} left no working tool in {}", staging.display());
    }
    if std::fs::rename(&staging, dir).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
        if !ready(dir) {
            bail!("cannot move {what} into {}", dir.display());
        }
    }
    Ok(())
}

/// Runs an installer, with its output on stderr.
fn install_step(command: &mut Command, what: &str, hint: &str) -> anyhow::Result<()> {
    let status = command.stdout(std::io::stderr()).status().with_context(|| format!("running {what}: {hint}"))?;
    if !status.success() {
        bail!("{what} failed ({status}); {hint}");
    }
    Ok(())
}

/// componentize-py, installed from its PyPI wheel (which ships the native tool).
pub fn componentize_py() -> anyhow::Result<Tool> {
    let Some(python) = which("python3") else {
        bail!("Python guests need python3 (3.10 or newer) with pip: e.g. `apt-get install python3 python3-pip`");
    };
    let dir = tools_dir()?.join(format!("componentize-py-{COMPONENTIZE_PY}"));
    let script = |d: &Path| d.join("bin/componentize-py");
    installed(
        &dir,
        &format!("componentize-py {COMPONENTIZE_PY} from PyPI"),
        |d| script(d).is_file(),
        |d| {
            install_step(
                Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
                    .arg(d)
                    .arg(format!("componentize-py=={COMPONENTIZE_PY}"))
                    .env("PIP_ROOT_USER_ACTION", "ignore"),
                "pip install componentize-py",
                "is pip installed (`python3 -m pip --version`) and PyPI reachable?",
            )
        },
    )?;
    // The package has no `__main__`: its console script is what runs it.
    Ok(Tool { program: python, args: vec![script(&dir).display().to_string()], env: vec![("PYTHONPATH".into(), dir)] })
}

/// esbuild and componentize-js, installed from npm.
pub struct NodeTools {
    bin: PathBuf,
}

impl NodeTools {
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    pub fn esbuild(&self) -> Command {
        Command::new(self.bin.join("esbuild"))
    }

    pub fn componentize_js(&self) -> Command {
        Command::new(self.bin.join("componentize-js"))
    }
}

/// The JavaScript build tools at the versions `locked` (the JS SDK's `tools/`, a
/// package.json and its package-lock.json) pins, in a directory named after the lock.
pub fn node_tools(locked: &Path) -> anyhow::Result<NodeTools> {
    let Some(npm) = which("npm") else {
        bail!("JavaScript and TypeScript guests need Node.js 20 or newer with npm: https://nodejs.org or `apt-get install nodejs npm`");
    };
    let lock = std::fs::read(locked.join("package-lock.json")).context("the JS SDK has no tools/package-lock.json")?;
    let hash = super::fnv1a(&lock);
    let dir = tools_dir()?.join(format!("node-tools-{:08x}", hash as u32));
    let ready = |d: &Path| ["esbuild", "componentize-js"].iter().all(|b| d.join("node_modules/.bin").join(b).exists());
    let what = format!("componentize-js {COMPONENTIZE_JS} and esbuild {ESBUILD} from npm");
    installed(&dir, &what, ready, |d| {
        std::fs::create_dir_all(d)?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(locked.join(file), d.join(file)).with_context(|| format!("copying {file}"))?;
        }
        // `npm install` keeps the lock's versions; npm 11's `npm ci` refuses this lock
        // (its optional platform packages).
        install_step(
            Command::new(&npm).args(["install", "--silent", "--omit=dev", "--no-audit", "--no-fund", "--prefix"]).arg(d),
            "npm install",
            "is the npm registry reachable?",
        )
    })?;
    Ok(NodeTools { bin: dir.join("node_modules/.bin") })
}

/// Go on PATH, recent enough for wasip1 reactors.
pub fn go() -> anyhow::Result<PathBuf> {
    let hint = format!("Go guests need Go {}.{} or newer on PATH: https://go.dev/dl", GO_MIN.0, GO_MIN.1);
    let Some(go) = which("go") else { bail!("{hint}") };
    let out = Command::new(&go).arg("version").output().with_context(|| format!("running go version; {hint}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // `go version go1.26.8 linux/amd64`
    let version = text.split_whitespace().nth(2).and_then(|v| v.strip_prefix("go")).unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < GO_MIN {
        bail!("{hint} (found {})", text.trim());
    }
    Ok(go)
}

/// clang that can build wasm32-wasip1 reactors: with lld and wasi-libc.
pub fn wasi_clang() -> anyhow::Result<PathBuf> {
    let hint = "C guests need clang, lld and wasi-libc for wasm32: on Debian or Ubuntu \
                `apt-get install clang lld wasi-libc libclang-rt-dev-wasm32`";
    let Some(clang) = which("clang") else { bail!("{hint}") };
    if which("wasm-ld").is_none() {
        bail!("{hint} (wasm-ld, from lld, is missing)");
    }
    if !Path::new("/usr/include/wasm32-wasi/stdio.h").is_file() && !Path::new("/usr/include/wasm32-wasip1/stdio.h").is_file() {
        bail!("{hint} (wasi-libc's headers are missing)");
    }
    Ok(clang)
}

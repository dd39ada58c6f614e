//! `tally build [DIR]`: tells the project's language from its files, builds the
//! component with that language's toolchain against the SDK and WIT embedded in this
//! binary, and prints the component's path as the last line of stdout.
//!
//! | language   | the project has            | toolchain                                   |
//! |------------|----------------------------|---------------------------------------------|
//! | Rust       | `Cargo.toml`               | cargo, target wasm32-wasip2 (added by rustup) |
//! | Go         | `go.mod`                   | Go >= 1.24 (wasip1 core module), then wit-component here |
//! | TypeScript | `package.json`, `app.ts`   | esbuild + componentize-js (installed from npm) |
//! | JavaScript | `package.json`, `app.js`   | esbuild + componentize-js (installed from npm) |
//! | Python     | `app.py`                   | componentize-py (installed from PyPI)       |
//! | C          | `*.c`                      | clang, lld and wasi-libc (Debian packages), then wit-component here |
//!
//! A project builds a component of world `function` (`handle(bytes) -> bytes`) unless
//! its `tally.toml` says `world = "http-function"` (a `wasi:http` proxy that may import
//! Tally's interfaces; `tally new --http` writes that file). A Rust crate needs no such
//! file: its code says which world it exports.
//!
//! Outputs go to a cache directory per project (see [`super::sdk`]), never into the
//! project: a Rust project's `target/` too. Tools that `tally build` can install itself
//! (from PyPI and npm, pinned) go to the tools directory; for the others it says what to
//! install.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use super::sdk::{cache_dir, Sdk};
use super::tools;

/// A guest language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
    Ts,
    Go,
    C,
}

impl Lang {
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::Ts => "ts",
            Lang::Go => "go",
            Lang::C => "c",
        }
    }

    /// Tells a project's language from its files.
    pub fn detect(dir: &Path) -> anyhow::Result<Lang> {
        let has = |name: &str| dir.join(name).is_file();
        if has("Cargo.toml") {
            return Ok(Lang::Rust);
        }
        if has("go.mod") {
            return Ok(Lang::Go);
        }
        if has("package.json") {
            let typescript = js_entry(dir)?.is_some_and(|entry| entry.extension() == Some(OsStr::new("ts")));
            return Ok(if typescript { Lang::Ts } else { Lang::Js });
        }
        if has("app.py") {
            return Ok(Lang::Python);
        }
        if !c_sources(dir)?.is_empty() {
            return Ok(Lang::C);
        }
        bail!(
            "cannot tell the language of {}: expected Cargo.toml (Rust), go.mod (Go), package.json (JavaScript or \
             TypeScript), app.py (Python) or .c files (C); `tally new --lang <LANG> NAME` makes a project",
            dir.display()
        )
    }
}

/// The world a project's component is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// `handle(bytes) -> bytes`.
    Function,
    /// A `wasi:http/proxy` component that may import Tally's interfaces.
    Http,
}

impl World {
    /// The world's name in `wit/platform.wit`.
    pub fn name(self) -> &'static str {
        match self {
            World::Function => "function",
            World::Http => "http-function",
        }
    }

    /// The world the project in `dir` says it is built for: its `tally.toml`'s `world`,
    /// else `function`.
    pub fn of(dir: &Path) -> anyhow::Result<World> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Project {
            world: Option<String>,
        }
        let path = dir.join("tally.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(World::Function),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let project: Project = toml::from_str(&text).with_context(|| format!("{} is not a project file", path.display()))?;
        match project.world.as_deref() {
            None | Some("function") => Ok(World::Function),
            Some("http-function") => Ok(World::Http),
            Some(other) => bail!("{}: unknown world {other:?} (expected \"function\" or \"http-function\")", path.display()),
        }
    }
}

/// Builds the project in `dir` and returns the components built (one, or for a Rust
/// workspace one per `cdylib`).
pub fn build(dir: &Path, lang: Option<Lang>) -> anyhow::Result<Vec<PathBuf>> {
    let dir = dir.canonicalize().with_context(|| format!("no project at {}", dir.display()))?;
    let lang = match lang {
        Some(lang) => lang,
        None => Lang::detect(&dir)?,
    };
    // Cargo has its own layout: a target directory per workspace.
    if lang == Lang::Rust {
        return rust(&dir);
    }
    let world = World::of(&dir)?;
    let out = out_dir(&dir)?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let component = out.join(format!("{}.wasm", project_name(&dir)));
    let built = match lang {
        Lang::Rust => unreachable!("built above"),
        Lang::Python => python(&dir, &out, &component, world)?,
        Lang::Js | Lang::Ts => js(&dir, &out, &component, world)?,
        Lang::Go => go(&dir, &out, &component, world)?,
        Lang::C => c(&dir, &out, &component, world)?,
    };
    check_component(&built)?;
    Ok(vec![built])
}

/// The build directory of a project: named after it, and a hash of its path so that
/// two projects of one name do not share it.
fn out_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    if let Some(out) = std::env::var_os("TALLY_BUILD_DIR") {
        return Ok(PathBuf::from(out));
    }
    let hash = super::fnv1a(dir.as_os_str().as_encoded_bytes());
    Ok(cache_dir()?.join("build").join(format!("{}-{:08x}", project_name(dir), hash as u32)))
}

/// The project's directory name, reduced to what is safe in a file name.
fn project_name(dir: &Path) -> String {
    let name: String = dir
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or("function")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    if name.is_empty() {
        "function".into()
    } else {
        name
    }
}

/// A component starts with the wasm magic, then version 0x0d and layer 1; a core
/// module would have version 1 and layer 0.
fn check_component(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("the build wrote no {}", path.display()))?;
    if bytes.get(..8) != Some(&b"\0asm\x0d\0\x01\0"[..]) {
        bail!("{} is not a component", path.display());
    }
    Ok(())
}

/// Runs a build step; its output goes to stderr, so that stdout carries only paths.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command.stdout(std::io::stderr()).status().with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// A Rust crate or workspace: cargo for wasm32-wasip2 in release, with the target
/// directory in the build cache (one per workspace, so the members share it).
fn rust(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    const TARGET: &str = "wasm32-wasip2";
    tools::rust_target(dir, TARGET)?;
    let workspace = Command::new("cargo")
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .current_dir(dir)
        .output()
        .context("running cargo: is Rust installed? https://rustup.rs")?;
    if !workspace.status.success() {
        bail!("cargo locate-project failed: {}", String::from_utf8_lossy(&workspace.stderr).trim());
    }
    let manifest = PathBuf::from(String::from_utf8_lossy(&workspace.stdout).trim());
    let target_dir = out_dir(manifest.parent().unwrap_or(dir))?.join("target");
    let out = Command::new("cargo")
        .args(["build", "--release", "--target", TARGET, "--message-format=json-render-diagnostics"])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !out.status.success() {
        bail!("cargo build failed");
    }
    let mut built = Vec::new();
    for line in out.stdout.split(|&b| b == b'\n') {
        let Ok(msg) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        for f in msg["filenames"].as_array().into_iter().flatten().filter_map(|f| f.as_str()) {
            if f.ends_with(".wasm") {
                built.push(PathBuf::from(f));
            }
        }
    }
    if built.is_empty() {
        bail!("no component was built: is the crate's crate-type [\"cdylib\"]?");
    }
    for path in &built {
        check_component(path)?;
    }
    Ok(built)
}

/// A Python project: componentize-py over copies of the project and the SDK (it writes
/// `__pycache__` next to what it reads), in an empty virtual environment so that nothing
/// installed on the host slips into the component. The SDK's entry module of the world
/// imports the project's `app` and exports what the world asks for.
fn python(dir: &Path, out: &Path, component: &Path, world: World) -> anyhow::Result<PathBuf> {
    let entry = match world {
        World::Function => "tally.entry",
        World::Http => "tally.http_entry",
    };
    let sdk = Sdk::materialize()?;
    let componentize_py = tools::componentize_py()?;
    let scratch = out.join("python");
    let _ = std::fs::remove_dir_all(&scratch);
    copy_tree(&sdk.lang("python").join("tally"), &scratch.join("sdk/tally"))?;
    copy_tree(dir, &scratch.join("app"))?;
    let venv = scratch.join("venv");
    std::fs::create_dir_all(venv.join("lib/site-packages"))?;
    run(
        componentize_py
            .command()
            .arg("-d")
            .arg(sdk.wit_dir())
            .args(["-w", world.name(), "componentize", entry, "-p"])
            .arg(scratch.join("app"))
            .arg("-p")
            .arg(scratch.join("sdk"))
            .arg("-o")
            .arg(component)
            .env("VIRTUAL_ENV", &venv)
            .env("RUST_BACKTRACE", "0")
            .current_dir(&scratch),
        "componentize-py",
    )?;
    Ok(component.to_path_buf())
}

/// Copies a directory tree, leaving out dot-directories and `__pycache__`.
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if name != "__pycache__" && !name.to_string_lossy().starts_with('.') {
                copy_tree(&entry.path(), &to.join(&name))?;
            }
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name)).with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The entry module of a JavaScript or TypeScript project: `main` in package.json,
/// else `app.ts`, else `app.js`.
fn js_entry(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let manifest = dir.join("package.json");
    let text = std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let package: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", manifest.display()))?;
    if let Some(main) = package["main"].as_str() {
        return Ok(Some(dir.join(main)));
    }
    Ok(["app.ts", "app.js"].into_iter().map(|f| dir.join(f)).find(|p| p.is_file()))
}

/// A JavaScript or TypeScript project: esbuild bundles the SDK's entry glue, the
/// project and its dependencies into one module (compiling TypeScript), and
/// componentize-js evaluates and snapshots it in StarlingMonkey.
fn js(dir: &Path, out: &Path, component: &Path, world: World) -> anyhow::Result<PathBuf> {
    let sdk = Sdk::materialize()?;
    let js_sdk = sdk.lang("js");
    let Some(entry) = js_entry(dir)? else {
        bail!("{} has no entry module: add app.ts or app.js, or name one in package.json's \"main\"", dir.display());
    };
    if !entry.is_file() {
        bail!("the entry module {} does not exist", entry.display());
    }
    let node = tools::node_tools(&js_sdk.join("tools"))?;
    let scratch = out.join("js");
    std::fs::create_dir_all(&scratch)?;
    // The entry glue exports `handle` for world `function`; for `http-function` it serves
    // the project's default `{ fetch }` on StarlingMonkey's `fetch` event.
    let (glue, disabled): (&str, &[&str]) = match world {
        World::Function => ("entry.js", &["http", "fetch-event"]),
        World::Http => ("entry-http.js", &[]),
    };
    run(
        node.esbuild()
            .arg(js_sdk.join(glue))
            .args(["--bundle", "--format=esm", "--external:tally:*", "--external:wasi:*", "--log-level=warning"])
            .arg(format!("--alias:tally-app={}", entry.display()))
            .arg(format!("--alias:@tally/sdk={}", js_sdk.display()))
            .arg(format!("--outfile={}", scratch.join("app.js").display()))
            .current_dir(dir),
        "esbuild",
    )?;
    // Run from the scratch directory, so that stack traces name the bundle `app.js`.
    // World `function` has no wasi:http: the engine's `fetch` and `fetch` event are left
    // out (`-d`), or the component would import and export it. World `http-function`
    // keeps both: the `fetch` event exports `wasi:http/incoming-handler@0.2.10`.
    let mut componentize = node.componentize_js();
    componentize.arg("--wit").arg(sdk.wit_dir()).args(["--world-name", world.name()]);
    if !disabled.is_empty() {
        componentize.arg("-d").args(disabled);
    }
    run(componentize.arg("-o").arg(component).arg("app.js").env("TMPDIR", &scratch).current_dir(&scratch), "componentize-js")?;
    Ok(component.to_path_buf())
}

/// A Go project: a wasip1 reactor core module of the project's `main` package, built
/// in a workspace with the SDK's module (so that it resolves without the network and
/// the project's go.mod stays as written), then made a component here.
fn go(dir: &Path, out: &Path, component: &Path, world: World) -> anyhow::Result<PathBuf> {
    let sdk = Sdk::materialize()?;
    let go = tools::go()?;
    let work = out.join("go.work");
    std::fs::write(
        &work,
        format!("go 1.24\n\nuse (\n\t{:?}\n\t{:?}\n)\n", dir.display().to_string(), sdk.lang("go").display().to_string()),
    )?;
    let core = out.join("core.wasm");
    run(
        Command::new(go)
            .args(["build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o"])
            .arg(&core)
            .arg(".")
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOWORK", &work)
            .env("GOFLAGS", "-mod=readonly")
            .current_dir(dir),
        "go build",
    )?;
    // wasi:http is in the SDK's package tally.dev/tally/http, linked only when the project
    // imports it: name the likely mistake of each world before the encoder's message.
    componentize(&core, component, Some(world)).with_context(|| match world {
        World::Http => "an http-function Go project imports tally.dev/tally/http and declares its handler with its Handle",
        World::Function => {
            "a Go function of world `function` cannot use tally.dev/tally/http, as the world has no wasi:http \
             (world = \"http-function\" in tally.toml makes an HTTP function)"
        }
    })?;
    Ok(component.to_path_buf())
}

fn c(dir: &Path, out: &Path, component: &Path, world: World) -> anyhow::Result<PathBuf> {
    let sdk = Sdk::materialize()?;
    let clang = tools::wasi_clang()?;
    let c_sdk = sdk.lang("c");
    let core = out.join("core.wasm");
    // Each world has its bindings (named after it) and its export in a directory of
    // src/; the shared sources pick the world's bindings by the define (src/wit.h).
    let (bindings, export_dir, define) = match world {
        World::Function => ("function", "function", None),
        World::Http => ("http_function", "http", Some("-DTALLY_HTTP_FUNCTION")),
    };
    // Debian's clang 14 knows wasi-libc's sysroot as `wasm32-wasi`. The bindings'
    // object carries the world's type, so the component needs no embedding.
    let mut command = Command::new(clang);
    command
        .args(["--target=wasm32-wasi", "--sysroot=/usr", "-mexec-model=reactor", "-O2", "-Wall", "-Wl,--strip-debug"])
        .args(define)
        .arg("-I")
        .arg(c_sdk.join("include"))
        .args(c_sources(&c_sdk.join("src"))?)
        .args(c_sources(&c_sdk.join("src").join(export_dir))?)
        .arg(c_sdk.join(format!("bindings/{bindings}.c")))
        .arg(c_sdk.join(format!("bindings/{bindings}_component_type.o")))
        .args(c_sources(dir)?)
        .arg("-o")
        .arg(&core)
        .current_dir(dir);
    run(&mut command, "clang")?;
    componentize(&core, component, None)?;
    Ok(component.to_path_buf())
}

/// The `.c` files directly in `dir`, sorted.
fn c_sources(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(sources) };
    for entry in entries {
        let path = entry?.path();
        if path.extension() == Some(OsStr::new("c")) && path.is_file() {
            sources.push(path);
        }
    }
    sources.sort();
    Ok(sources)
}

/// Makes a component of a WASI preview 1 core module: embeds the type of world `embed`
/// (none when the module already carries it, as wit-bindgen's C output does) and adapts
/// preview 1 to the preview 2 interfaces the host gives, with the adapter of the host's
/// wasmtime.
fn componentize(core: &Path, component: &Path, embed: Option<World>) -> anyhow::Result<()> {
    let mut module = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    if let Some(world) = embed {
        let sdk = Sdk::materialize()?;
        let mut resolve = wit_parser::Resolve::default();
        let (package, _) = resolve.push_dir(sdk.wit_dir()).context("parsing the WIT")?;
        let world = resolve
            .select_world(&[package], Some(world.name()))
            .with_context(|| format!("the WIT has no world `{}`", world.name()))?;
        wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8, false)
            .context("embedding the world's type")?;
    }
    let bytes = wit_component::ComponentEncoder::default()
        .module(&module)
        .context("reading the core module")?
        .adapter("wasi_snapshot_preview1", wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)
        .context("adding the WASI adapter")?
        .validate(true)
        .encode()
        .context("making the component")?;
    std::fs::write(component, bytes).with_context(|| format!("writing {}", component.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_told_by_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let lang = |files: &[&str]| {
            let d = dir.path().join(files.join("+").replace('/', "_"));
            std::fs::create_dir_all(&d).unwrap();
            for f in files {
                std::fs::write(d.join(f), "").unwrap();
            }
            Lang::detect(&d).map_err(|e| e.to_string())
        };
        assert_eq!(lang(&["Cargo.toml"]), Ok(Lang::Rust));
        assert_eq!(lang(&["go.mod", "main.go"]), Ok(Lang::Go));
        // package.json is read: these are empty, so the entry is found by name.
        let mut ts = lang(&["app.ts", "package.json"]);
        assert!(ts.is_err(), "an empty package.json is not JSON: {ts:?}");
        let d = dir.path().join("ts");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("package.json"), "{}").unwrap();
        std::fs::write(d.join("app.ts"), "").unwrap();
        ts = Lang::detect(&d).map_err(|e| e.to_string());
        assert_eq!(ts, Ok(Lang::Ts));
        std::fs::write(d.join("package.json"), r#"{"main": "src/index.js"}"#).unwrap();
        assert_eq!(Lang::detect(&d).map_err(|e| e.to_string()), Ok(Lang::Js));
        assert_eq!(lang(&["app.py"]), Ok(Lang::Python));
        assert_eq!(lang(&["main.c"]), Ok(Lang::C));
        let error = lang(&["README.md"]).unwrap_err();
        assert!(error.contains("cannot tell the language") && error.contains("tally new"), "{error}");
    }

    #[test]
    fn build_directories_are_per_project_and_named_after_it() {
        assert_eq!(project_name(Path::new("/x/my app")), "my_app");
        let a = out_dir(Path::new("/x/a/hello")).unwrap();
        let b = out_dir(Path::new("/y/a/hello")).unwrap();
        assert_ne!(a, b);
        assert!(a.file_name().unwrap().to_str().unwrap().starts_with("hello-"));
    }
}

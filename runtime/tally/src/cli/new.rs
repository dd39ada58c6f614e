//! `tally new --lang LANG NAME`: a project that builds as is with `tally build`, whose
//! function echoes its input; with `--http`, an HTTP function (`tally.toml` says
//! `world = "http-function"`) that answers requests. The templates are
//! `runtime/tally/templates/<lang>/` and `<lang>-http/`, embedded here; `{{name}}` becomes the project's name and `{{sdk}}` the SDK directory that
//! `tally build` writes out (only the Rust template names it: cargo needs the path).

use std::path::Path;

use anyhow::{bail, Context as _};

use super::build::Lang;
use super::sdk::Sdk;

/// A template's files: (path in the project, contents). A file named `gitignore`
/// becomes `.gitignore` (a dotfile in the repository's templates would hide it).
fn template(lang: Lang, http: bool) -> &'static [(&'static str, &'static str)] {
    macro_rules! files {
        ($lang:literal: $($path:literal),* $(,)?) => {
            &[$(($path, include_str!(concat!("../../templates/", $lang, "/", $path)))),*]
        };
    }
    if http {
        return match lang {
            Lang::Rust => files!("rust-http": "Cargo.toml", "src/lib.rs", "gitignore"),
            Lang::Python => files!("python-http": "app.py", "pyproject.toml", "tally.toml", "gitignore"),
            Lang::Js => files!("js-http": "package.json", "app.js", "tally.toml", "gitignore"),
            Lang::Ts => files!("ts-http": "package.json", "app.ts", "tally.toml", "gitignore"),
            Lang::Go => files!("go-http": "go.mod", "main.go", "tally.toml", "gitignore"),
            Lang::C => files!("c-http": "app.c", "tally.toml", "gitignore"),
        };
    }
    match lang {
        Lang::Rust => files!("rust": "Cargo.toml", "src/lib.rs", "gitignore"),
        Lang::Python => files!("python": "app.py", "pyproject.toml", "gitignore"),
        Lang::Js => files!("js": "package.json", "app.js", "gitignore"),
        Lang::Ts => files!("ts": "package.json", "app.ts", "gitignore"),
        Lang::Go => files!("go": "go.mod", "main.go", "gitignore"),
        Lang::C => files!("c": "app.c", "gitignore"),
    }
}

pub fn new(lang: Lang, http: bool, dir: &Path) -> anyhow::Result<()> {
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
        bail!("{} does not end in a project name", dir.display());
    };
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        || !name.starts_with(|c: char| c.is_ascii_alphabetic())
    {
        bail!("the project name {name:?} must start with a letter and hold only letters, digits, - and _");
    }
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty", dir.display());
    }
    let sdk = if lang == Lang::Rust { Some(Sdk::materialize()?) } else { None };
    for (path, contents) in template(lang, http) {
        let mut text = contents.replace("{{name}}", name);
        if let Some(sdk) = &sdk {
            text = text.replace("{{sdk}}", &sdk.root.display().to_string());
        }
        let path = if *path == "gitignore" { ".gitignore" } else { path };
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let kind = if http { "HTTP function" } else { "function" };
    eprintln!("tally new: a {} {kind} in {}; build it with `tally build {}`", lang.name(), dir.display(), dir.display());
    Ok(())
}

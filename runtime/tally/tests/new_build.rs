//! `tally new` and `tally build` in every language, as a user runs them: the scaffold
//! builds as it is, its component echoes its input on a `tally dev` node, and the build
//! leaves nothing in the project but what `tally new` wrote (and, for Rust, the
//! `Cargo.lock` that cargo writes and a project keeps).
//!
//! The projects live under `~/.cache/tally-test-new/<lang>/` (made again by each run),
//! so that a warm machine reuses the Rust project's cargo target directory.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::node;

const TALLY: &str = env!("CARGO_BIN_EXE_tally");

/// The files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("a directory").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn new_builds_and_echoes(lang: &str, expected_files: &[&str]) {
    new_builds_and_echoes_leaving(lang, expected_files, expected_files);
}

fn new_builds_and_echoes_leaving(lang: &str, expected_files: &[&str], after_build: &[&str]) {
    let root = PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/tally-test-new").join(lang);
    let project = root.join("echo");
    let _ = std::fs::remove_dir_all(&project);
    std::fs::create_dir_all(&root).unwrap();

    let made = Command::new(TALLY).args(["new", "--lang", lang, "echo"]).current_dir(&root).output().unwrap();
    assert!(made.status.success(), "tally new: {}", String::from_utf8_lossy(&made.stderr));
    assert_eq!(files(&project), expected_files, "{lang}: what tally new wrote");

    // A second `new` over it is refused: nothing a user wrote is overwritten.
    let again = Command::new(TALLY).args(["new", "--lang", lang, "echo"]).current_dir(&root).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    let built = Command::new(TALLY).arg("build").arg(&project).output().unwrap();
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{lang}: tally build failed: {stderr}");
    let stdout = String::from_utf8_lossy(&built.stdout);
    let component = PathBuf::from(stdout.lines().last().expect("the component's path, last"));
    assert!(!component.starts_with(&project), "{lang}: the build wrote {} into the project", component.display());
    assert_eq!(files(&project), after_build, "{lang}: the build left files in the project");

    let (_dir, n) = node();
    n.deploy("echo", &std::fs::read(&component).expect("the component"), "");
    assert_eq!(n.invoke_ok("echo", 1, "héllo, wörld"), "héllo, wörld", "{lang}");
}

#[test]
fn rust() {
    new_builds_and_echoes_leaving(
        "rust",
        &[".gitignore", "Cargo.toml", "src/lib.rs"],
        &[".gitignore", "Cargo.lock", "Cargo.toml", "src/lib.rs"],
    );
}

#[test]
fn python() {
    new_builds_and_echoes("python", &[".gitignore", "app.py", "pyproject.toml"]);
}

#[test]
fn javascript() {
    new_builds_and_echoes("js", &[".gitignore", "app.js", "package.json"]);
}

#[test]
fn typescript() {
    new_builds_and_echoes("ts", &[".gitignore", "app.ts", "package.json"]);
}

#[test]
fn go() {
    new_builds_and_echoes("go", &[".gitignore", "go.mod", "main.go"]);
}

#[test]
fn c() {
    new_builds_and_echoes("c", &[".gitignore", "app.c"]);
}

#[test]
fn a_directory_of_no_language_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "nothing to build").unwrap();
    let out = Command::new(TALLY).arg("build").arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot tell the language") && stderr.contains("tally new --lang"), "{stderr}");
    assert!(out.stdout.is_empty());
}

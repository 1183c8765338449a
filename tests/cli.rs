//! The command line as a user meets it: help, version, exit statuses, completion scripts,
//! `generate crds`.

use std::process::{Command, Output};

fn capictl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn help_lists_every_subcommand_with_a_description() {
    let out = capictl(&["--help"]);
    assert!(out.status.success());
    let help = stdout(&out);
    for sub in [
        "init",
        "generate",
        "describe",
        "get",
        "move",
        "upgrade",
        "delete",
        "management",
        "manager",
        "version",
        "completion",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{sub} ")))
            .unwrap_or_else(|| panic!("`{sub}` missing from --help:\n{help}"));
        assert!(
            line.split_whitespace().count() > 2,
            "`{sub}` has no description: {line}"
        );
    }
}

#[test]
fn commands_not_built_yet_say_so_and_exit_2() {
    for args in [
        &["init", "--infrastructure", "docker"][..],
        &[
            "describe",
            "cluster",
            "capi-quickstart",
            "--show-conditions",
            "all",
        ],
        &["get", "kubeconfig", "capi-quickstart"],
        &["move", "--to-kubeconfig", "other.kubeconfig"],
        &["upgrade", "plan"],
        &["generate", "cluster", "capi-quickstart"],
    ] {
        let out = capictl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains("is not built yet"), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?} printed data");
    }
}

#[test]
fn a_bad_flag_value_is_a_usage_error() {
    let out = capictl(&["generate", "crds", "--provider", "aws"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("invalid value 'aws'") && err.contains("in-memory"),
        "{err}"
    );
}

#[test]
fn version_names_the_build_and_the_contract() {
    let text = stdout(&capictl(&["version"]));
    assert!(
        text.starts_with(&format!("capictl version {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(
        text.contains("git commit:") && text.contains("build date:"),
        "{text}"
    );
    assert!(text.contains("cluster.x-k8s.io/v1beta2"), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&capictl(&["version", "-o", "json"]))).unwrap();
    assert_eq!(json["contract"], "v1beta2");
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert!(json["buildDate"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn completion_scripts_in_the_repository_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for (shell, file) in [
        ("bash", "capictl.bash"),
        ("zsh", "_capictl"),
        ("fish", "capictl.fish"),
    ] {
        let out = capictl(&["completion", shell]);
        assert!(out.status.success());
        let committed = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(
            stdout(&out) == committed,
            "completions/{file} is stale: run `capictl completion {shell} > completions/{file}`"
        );
    }
}

#[test]
fn generate_crds_prints_one_provider_or_all() {
    let all: Vec<serde_json::Value> =
        capictl::yaml::from_multiple(&stdout(&capictl(&["generate", "crds"]))).unwrap();
    assert_eq!(all.len(), 18);
    assert!(all.iter().all(|d| d["kind"] == "CustomResourceDefinition"));

    let docker: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&capictl(&[
        "generate",
        "crds",
        "--provider",
        "docker",
    ])))
    .unwrap();
    let names: Vec<&str> = docker
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "dockerclusters.infrastructure.cluster.x-k8s.io",
            "dockerclustertemplates.infrastructure.cluster.x-k8s.io",
            "dockermachines.infrastructure.cluster.x-k8s.io",
            "dockermachinetemplates.infrastructure.cluster.x-k8s.io",
        ]
    );

    let two: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&capictl(&[
        "generate",
        "crds",
        "--provider",
        "core,clusterctl",
    ])))
    .unwrap();
    assert_eq!(two.len(), 7);
}

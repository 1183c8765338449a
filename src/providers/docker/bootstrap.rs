//! Bootstrap data as commands run in a node container by exec, as upstream's Docker provider
//! runs cloud-config (CAPD's `internal/provisioning/cloudinit`): `write_files` become `mkdir`,
//! `cat > path` with the content on stdin (every encoding decoded fully, `gz+b64` included),
//! `chmod` and `chown`; `runcmd` entries run through `/bin/sh -c`. `kubeadm init|join` get
//! CAPD's started-sentinel, so bootstrap never runs twice, and its preflight exceptions.
//! Modules other than `write_files` and `runcmd` are reported and skipped (upstream fails on
//! them).

use std::io::Read as _;

use base64::Engine;
use serde_json::Value;

/// Left by the first bootstrap command that runs kubeadm; its presence means "never again".
pub const STARTED_SENTINEL: &str = "/run/cluster-api/capd.bootstrap.started";
/// The preflight errors CAPD tells kubeadm to ignore in containers.
pub const IGNORED_PREFLIGHT_ERRORS: &str =
    "SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables";

/// One command of the bootstrap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// What it does, for progress and errors.
    pub description: String,
    pub argv: Vec<String>,
    pub stdin: Option<Vec<u8>>,
    /// How often a failure is retried (writing files is; running commands is not).
    pub retries: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BootstrapError {
    #[error("the bootstrap data is not valid cloud-config YAML: {0}")]
    Yaml(String),
    #[error("write_files entry {index} ({path}): {message}")]
    File {
        index: usize,
        path: String,
        message: String,
    },
}

fn sh(description: String, script: String, stdin: Option<Vec<u8>>, retries: u32) -> Command {
    Command {
        description,
        argv: vec!["/bin/sh".into(), "-c".into(), script],
        stdin,
        retries,
    }
}

/// Quotes a word for `/bin/sh`.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A file's content after its encoding: base64, gzip, or both (decoded in turn).
pub fn decode(content: &str, encoding: &str) -> Result<Vec<u8>, String> {
    let b64 = |s: &[u8]| {
        let clean: Vec<u8> = s
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(clean)
            .map_err(|e| format!("content is not base64: {e}"))
    };
    let gunzip = |b: &[u8]| {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .map_err(|e| format!("content is not gzip: {e}"))?;
        Ok::<_, String>(out)
    };
    match encoding.to_ascii_lowercase().as_str() {
        "" | "text/plain" => Ok(content.as_bytes().to_vec()),
        "b64" | "base64" => b64(content.as_bytes()),
        "gz" | "gzip" => gunzip(content.as_bytes()),
        "gz+b64" | "gzip+b64" | "gz+base64" | "gzip+base64" => gunzip(&b64(content.as_bytes())?),
        other => Err(format!("unknown encoding {other:?}")),
    }
}

/// CAPD's adjustments to kubeadm's configuration in a container: a KubeProxyConfiguration
/// that does not touch conntrack limits is appended to the init configuration.
fn adjust_kubeadm_config(path: &str, content: Vec<u8>) -> Vec<u8> {
    if path != crate::kubeadm::cloudinit::INIT_CONFIG_PATH {
        return content;
    }
    let mut text = String::from_utf8_lossy(&content).to_string();
    if !text.contains("kind: KubeProxyConfiguration") {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 0\n");
    }
    text.into_bytes()
}

fn write_file_commands(index: usize, file: &Value) -> Result<Vec<Command>, BootstrapError> {
    let path = file["path"].as_str().unwrap_or_default().to_string();
    let error = |message: String| BootstrapError::File {
        index,
        path: path.clone(),
        message,
    };
    if path.is_empty() {
        return Err(error("path is missing".into()));
    }
    let content = decode(
        file["content"].as_str().unwrap_or_default(),
        file["encoding"].as_str().unwrap_or_default(),
    )
    .map_err(error)?;
    let content = adjust_kubeadm_config(&path, content);
    let quoted = shell_quote(&path);
    let dir = std::path::Path::new(&path)
        .parent()
        .map(|d| d.display().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/".into());
    let redirect = if file["append"] == true { ">>" } else { ">" };
    let mut commands = vec![
        sh(
            format!("mkdir {dir}"),
            format!("mkdir -p {}", shell_quote(&dir)),
            None,
            5,
        ),
        sh(
            format!("write {path}"),
            format!("cat {redirect} {quoted} /dev/stdin"),
            Some(content),
            5,
        ),
    ];
    let permissions = match &file["permissions"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    if !permissions.is_empty() && permissions != "0644" {
        commands.push(sh(
            format!("chmod {path}"),
            format!("chmod {} {quoted}", shell_quote(&permissions)),
            None,
            5,
        ));
    }
    let owner = file["owner"].as_str().unwrap_or_default();
    if !owner.is_empty() && owner != "root:root" && owner != "root" {
        commands.push(sh(
            format!("chown {path}"),
            format!("chown {} {quoted}", shell_quote(owner)),
            None,
            5,
        ));
    }
    Ok(commands)
}

/// Gives `kubeadm init|join` CAPD's started-sentinel and preflight exceptions.
fn hack_kubeadm(script: &str) -> String {
    for verb in ["kubeadm init", "kubeadm join"] {
        if let Some(at) = script.find(verb) {
            let (before, after) = script.split_at(at);
            return format!(
                "{before}mkdir -p /run/cluster-api && echo started > {STARTED_SENTINEL} && {verb} --ignore-preflight-errors={IGNORED_PREFLIGHT_ERRORS}{}",
                &after[verb.len()..]
            );
        }
    }
    script.to_string()
}

fn runcmd_command(entry: &Value) -> Option<Command> {
    let script = match entry {
        Value::String(s) => s.clone(),
        Value::Array(words) => words
            .iter()
            .map(|w| match w {
                Value::String(s) => shell_quote(s),
                other => shell_quote(&other.to_string()),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    let script = hack_kubeadm(&script);
    Some(sh(format!("run {}", first_line(&script)), script, None, 0))
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or_default();
    if line.len() > 120 {
        format!("{}…", &line[..120])
    } else {
        line.to_string()
    }
}

/// The commands for a cloud-config, in cloud-init's order (files are written in its init
/// stage, commands run in its final stage, wherever the document puts them), and the modules
/// that were skipped.
pub fn commands(cloud_config: &str) -> Result<(Vec<Command>, Vec<String>), BootstrapError> {
    let parsed: Value =
        crate::yaml::from_str(cloud_config).map_err(|e| BootstrapError::Yaml(e.to_string()))?;
    let mut commands = Vec::new();
    for (i, file) in parsed["write_files"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        commands.extend(write_file_commands(i, file)?);
    }
    commands.extend(
        parsed["runcmd"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(runcmd_command),
    );
    let skipped = parsed
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| !matches!(k.as_str(), "write_files" | "runcmd"))
        .map(|k| format!("cloud-init module {k:?} is not run in Docker machines; skipped"))
        .collect();
    Ok((commands, skipped))
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs the bootstrap commands in `container` in order; a failure says which command failed
/// with the last lines it printed (as CAPD's `BootstrapCompleted` message does). `progress` is
/// told each command as it starts (`i` of `n`).
pub async fn run(
    docker: &bollard::Docker,
    container: &str,
    commands: &[Command],
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<(), String> {
    for (i, command) in commands.iter().enumerate() {
        progress(i + 1, commands.len(), &command.description);
        let mut attempt = 0;
        loop {
            let result =
                super::exec(docker, container, &command.argv, command.stdin.as_deref()).await;
            let failure = match result {
                Ok(out) if out.code == 0 => break,
                Ok(out) => format!(
                    "{}\nERROR: exit status {}\nSTDOUT: {}\nSTDERR: {}",
                    command.description,
                    out.code,
                    tail(&out.stdout, 10),
                    tail(&out.stderr, 5)
                ),
                Err(e) => format!("{}\nERROR: {e}", command.description),
            };
            if attempt >= command.retries {
                return Err(failure);
            }
            attempt += 1;
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn every_encoding_is_decoded_fully() {
        let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
        assert_eq!(decode("hello", "").unwrap(), b"hello");
        assert_eq!(decode(&b64(b"hello"), "base64").unwrap(), b"hello");
        assert_eq!(decode(&b64(b"hello"), "b64").unwrap(), b"hello");
        assert_eq!(
            decode(&b64(&gzip(b"hello")), "gz+b64").unwrap(),
            b"hello",
            "upstream stops after base64 here"
        );
        assert_eq!(
            decode(&b64(&gzip(b"hello")), "gzip+base64").unwrap(),
            b"hello"
        );
        assert!(decode("x", "rot13").unwrap_err().contains("rot13"));
        assert!(decode("***", "base64").is_err());
    }

    #[test]
    fn cloud_config_becomes_exec_commands_files_first() {
        let cloud = "## template: jinja\n#cloud-config\nruncmd:\n  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'\n  - [echo, \"it's done\"]\nwrite_files:\n-   path: /etc/kubernetes/pki/ca.key\n    owner: root:root\n    permissions: '0600'\n    content: |\n      KEY\n-   path: /run/kubeadm/kubeadm.yaml\n    owner: root:root\n    permissions: '0640'\n    content: |\n      apiVersion: kubeadm.k8s.io/v1beta3\n      kind: InitConfiguration\n-   path: /tmp/app\n    owner: app:app\n    append: true\n    content: more\nntp:\n  enabled: true\n";
        let (commands, skipped) = commands(cloud).unwrap();
        assert_eq!(
            skipped,
            vec!["cloud-init module \"ntp\" is not run in Docker machines; skipped".to_string()]
        );
        let scripts: Vec<&str> = commands.iter().map(|c| c.argv[2].as_str()).collect();
        assert_eq!(scripts[0], "mkdir -p /etc/kubernetes/pki");
        assert_eq!(scripts[1], "cat > /etc/kubernetes/pki/ca.key /dev/stdin");
        assert_eq!(commands[1].stdin.as_deref(), Some(&b"KEY\n"[..]));
        assert_eq!(scripts[2], "chmod 0600 /etc/kubernetes/pki/ca.key");
        let kubeadm = String::from_utf8(commands[4].stdin.clone().unwrap()).unwrap();
        assert!(
            kubeadm.ends_with("kind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 0\n"),
            "{kubeadm}"
        );
        assert!(scripts.contains(&"cat >> /tmp/app /dev/stdin"));
        assert!(scripts.contains(&"chown app:app /tmp/app"));
        let run = scripts[scripts.len() - 2];
        assert!(run.starts_with(&format!("mkdir -p /run/cluster-api && echo started > {STARTED_SENTINEL} && kubeadm init --ignore-preflight-errors={IGNORED_PREFLIGHT_ERRORS} --config")), "{run}");
        assert_eq!(scripts[scripts.len() - 1], "echo 'it'\\''s done'");
        assert_eq!(commands[1].retries, 5);
        assert_eq!(
            commands[commands.len() - 1].retries,
            0,
            "commands are not retried"
        );
        assert!(matches!(
            super::commands("a: [").unwrap_err(),
            BootstrapError::Yaml(_)
        ));
    }

    /// The contract with upstream for the bootstrap data capictl's KubeadmConfig controller
    /// writes: the commands CAPD v1.14 runs for it (`internal/provisioning/cloudinit`,
    /// `TestRealUseCase` and `hackKubeadmIgnoreErrors`), each as the shell line its argv
    /// makes, with CAPD's retries (5 for files, none for commands).
    #[test]
    fn capictls_bootstrap_data_runs_as_capd_runs_it() {
        use crate::kubeadm::cloudinit::{
            Action, JOIN_CONFIG_PATH, SENTINEL, WriteFile, cloud_config,
        };
        let spec = serde_json::from_value(serde_json::json!({
            "preKubeadmCommands": ["echo before"],
            "postKubeadmCommands": ["touch /tmp/after"],
        }))
        .unwrap();
        let files = vec![
            WriteFile::new("/etc/kubernetes/pki/ca.crt", "0640", "CERT"),
            WriteFile::new("/etc/kubernetes/pki/ca.key", "0600", "KEY"),
        ];
        let data = cloud_config(&spec, Action::Join, "kind: JoinConfiguration\n", files);
        let (commands, skipped) = commands(&data).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        let lines: Vec<(&str, u32)> = commands
            .iter()
            .map(|c| {
                assert_eq!(c.argv[..2], ["/bin/sh", "-c"]);
                (c.argv[2].as_str(), c.retries)
            })
            .collect();
        let join = format!(
            "mkdir -p /run/cluster-api && echo started > {STARTED_SENTINEL} && kubeadm join --ignore-preflight-errors={IGNORED_PREFLIGHT_ERRORS} --config {JOIN_CONFIG_PATH} && echo success > {SENTINEL}"
        );
        let capd = vec![
            ("mkdir -p /etc/kubernetes/pki", 5),
            ("cat > /etc/kubernetes/pki/ca.crt /dev/stdin", 5),
            ("chmod 0640 /etc/kubernetes/pki/ca.crt", 5),
            ("mkdir -p /etc/kubernetes/pki", 5),
            ("cat > /etc/kubernetes/pki/ca.key /dev/stdin", 5),
            ("chmod 0600 /etc/kubernetes/pki/ca.key", 5),
            ("mkdir -p /run/kubeadm", 5),
            ("cat > /run/kubeadm/kubeadm-join-config.yaml /dev/stdin", 5),
            ("chmod 0640 /run/kubeadm/kubeadm-join-config.yaml", 5),
            // CABPK's placeholder, which makes /run/cluster-api on Linux and Windows alike.
            ("mkdir -p /run/cluster-api", 5),
            ("cat > /run/cluster-api/placeholder /dev/stdin", 5),
            ("chmod 0640 /run/cluster-api/placeholder", 5),
            ("echo before", 0),
            (join.as_str(), 0),
            ("touch /tmp/after", 0),
        ];
        assert_eq!(lines, capd);
        assert_eq!(commands[1].stdin.as_deref(), Some(&b"CERT"[..]));
    }
}

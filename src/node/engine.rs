//! The Docker Engine's exec, as the node's runtime, probes and hooks use it (and the Docker
//! provider, for its load balancers): a command run in a container, its output gathered.

use bollard::Docker;

/// What a command run in a container printed, and its exit code.
#[derive(Clone, Debug, Default)]
pub struct ExecOutput {
    pub code: i64,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `argv` in `container` (as `docker exec -i`), feeding it `stdin`, and waits for it.
pub async fn exec(
    docker: &Docker,
    container: &str,
    argv: &[String],
    stdin: Option<&[u8]>,
) -> Result<ExecOutput, bollard::errors::Error> {
    use bollard::exec::{CreateExecOptions, StartExecResults};
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdin: Some(stdin.is_some()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(argv.to_vec()),
                ..Default::default()
            },
        )
        .await?;
    let mut out = ExecOutput::default();
    if let StartExecResults::Attached {
        mut output,
        mut input,
    } = docker.start_exec(&created.id, None).await?
    {
        if let Some(data) = stdin {
            input
                .write_all(data)
                .await
                .map_err(|err| bollard::errors::Error::IOError { err })?;
        }
        let _ = input.shutdown().await;
        drop(input);
        while let Some(chunk) = output.next().await {
            match chunk? {
                bollard::container::LogOutput::StdOut { message } => {
                    out.stdout.push_str(&String::from_utf8_lossy(&message))
                }
                bollard::container::LogOutput::StdErr { message } => {
                    out.stderr.push_str(&String::from_utf8_lossy(&message))
                }
                _ => {}
            }
        }
    }
    loop {
        let inspected = docker.inspect_exec(&created.id).await?;
        if inspected.running != Some(true) {
            out.code = inspected.exit_code.unwrap_or(-1);
            return Ok(out);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

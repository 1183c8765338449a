//! `pods/exec` and `pods/attach`: a command run in a Pod's container, or the container's own
//! process, its streams carried over the upgraded connection, as kube-apiserver serves
//! `kubectl exec` (and `kubectl cp`, which is `tar` through exec) and `kubectl attach`: over
//! WebSocket with the `v5.channel.k8s.io` or `v4.channel.k8s.io`
//! protocols (current kubectl, kube-rs), or over SPDY/3.1 ([`super::spdy`], kubectl before
//! 1.30 and later ones when WebSocket fails).
//!
//! kube-apiserver asks the Pod's kubelet; this server asks whatever runs the Pods through an
//! [`ExecSource`] registered at start-up (a capictl node's API server runs the command on the
//! Docker Engine). Whatever the transport, the channels are kubelet's: 0 stdin, 1 stdout,
//! 2 stderr, 3 the final status (a `Status` object: `Success`, or `NonZeroExitCode` with the
//! exit code as its cause, which kubectl exits with), 4 terminal resizes.

use std::pin::Pin;

use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::portforward::frame;
use super::status::ApiError;

/// The channel protocols served over WebSocket, preferred first; v5 adds the client's
/// "stdin is closed" message.
const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// v5: the client closes one of its channels (stdin).
const CLOSE: u8 = 255;

/// What `kubectl exec` asks for, from the query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecOptions {
    pub command: Vec<String>,
    pub container: Option<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl ExecOptions {
    /// The options of an exec's query (`command=sh&command=-c&command=...&stdin=true&tty=true`).
    pub fn parse(query: Option<&str>) -> Result<ExecOptions, ApiError> {
        let options = ExecOptions::parse_streams(query)?;
        if options.command.is_empty() {
            return Err(ApiError::bad_request(
                "you must specify at least 1 command: say what to run in the container",
            ));
        }
        Ok(options)
    }

    /// The options of an attach's query: the streams alone (an attach runs no command).
    pub fn parse_attach(query: Option<&str>) -> Result<ExecOptions, ApiError> {
        let mut options = ExecOptions::parse_streams(query)?;
        options.command.clear();
        Ok(options)
    }

    fn parse_streams(query: Option<&str>) -> Result<ExecOptions, ApiError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
        let mut options = ExecOptions::default();
        for (key, value) in pairs {
            let yes = value == "true" || value == "1";
            match key.as_str() {
                "command" => options.command.push(value),
                "container" if !value.is_empty() => options.container = Some(value),
                "stdin" => options.stdin = yes,
                "stdout" => options.stdout = yes,
                "stderr" => options.stderr = yes,
                "tty" => options.tty = yes,
                _ => {}
            }
        }
        if !(options.stdin || options.stdout || options.stderr) {
            return Err(ApiError::bad_request(
                "you must specify at least one of stdin, stdout, stderr",
            ));
        }
        // A terminal has one output: stderr comes through stdout.
        if options.tty {
            options.stderr = false;
        }
        Ok(options)
    }
}

/// A running command's output, by channel ([`STDOUT`] or [`STDERR`]).
pub type ExecOutput = BoxStream<'static, Result<(u8, Bytes), std::io::Error>>;

/// A command started in a container.
pub struct ExecSession {
    /// Its standard input, when asked for.
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    pub output: ExecOutput,
    /// Resizes its terminal (width, height).
    pub resize: Box<dyn Fn(u16, u16) -> BoxFuture<'static, ()> + Send + Sync>,
    /// Its exit code, once its output has ended.
    pub exit_code: BoxFuture<'static, Result<i64, String>>,
}

/// Where the Pods' commands run.
pub trait ExecSource: Send + Sync {
    /// Starts `options.command` in `container` of `pod`; an error says why it cannot run.
    fn exec(
        &self,
        pod: &Value,
        container: &str,
        options: &ExecOptions,
    ) -> BoxFuture<'static, Result<ExecSession, String>>;

    /// Attaches to the process of `container` of `pod` (its streams as `options` asks); the
    /// session's exit code is the container's, once it exits.
    fn attach(
        &self,
        pod: &Value,
        container: &str,
        options: &ExecOptions,
    ) -> BoxFuture<'static, Result<ExecSession, String>>;
}

/// Whether a request is an exec or an attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Exec,
    Attach,
}

/// The final status kubelet writes on the error channel.
pub fn final_status(command: &[String], exit: &Result<i64, String>) -> Value {
    match exit {
        Ok(0) => json!({"metadata": {}, "status": "Success"}),
        Ok(code) => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command [{}], exit code {code}", command.join(" ")),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        Err(why) => json!({
            "metadata": {},
            "status": "Failure",
            "message": why,
        }),
    }
}

/// A terminal size as the resize channel carries it: `{"Width":80,"Height":24}`.
pub fn terminal_size(bytes: &[u8]) -> Option<(u16, u16)> {
    let size: Value = serde_json::from_slice(bytes).ok()?;
    Some((
        size["Width"].as_u64()?.try_into().ok()?,
        size["Height"].as_u64()?.try_into().ok()?,
    ))
}

/// The container and the started command of a request, or the error kube-apiserver answers.
pub async fn start(
    source: Option<&std::sync::Arc<dyn ExecSource>>,
    pod: &Value,
    options: &ExecOptions,
    stream: Stream,
) -> Result<ExecSession, ApiError> {
    let container = super::logs::container_of(pod, options.container.as_deref())?;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    if pod["status"]["phase"].as_str() != Some("Running") {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade connection: pod {name} is not running"
        )));
    }
    let Some(source) = source else {
        return Err(ApiError::bad_request(
            "this API server runs no Pods' containers, so there is nothing to exec in or attach to",
        ));
    };
    let started = match stream {
        Stream::Exec => source.exec(pod, &container, options).await,
        Stream::Attach => source.attach(pod, &container, options).await,
    };
    started.map_err(|why| ApiError::bad_request(format!("unable to upgrade connection: {why}")))
}

/// Answers the WebSocket handshake and runs the session over the upgraded connection.
pub fn serve_websocket(
    req: Request,
    session: ExecSession,
    options: ExecOptions,
) -> Result<Response, ApiError> {
    let (answer, protocol) = super::portforward::handshake(req.headers(), PROTOCOLS, "pods/exec")?;
    Ok(super::portforward::upgrade(
        req,
        answer,
        "pods/exec",
        move |ws| async move {
            run_websocket(ws, session, &options.command, protocol == PROTOCOLS[0]).await
        },
    ))
}

async fn run_websocket<S>(
    ws: WebSocketStream<S>,
    session: ExecSession,
    command: &[String],
    v5: bool,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut incoming) = ws.split();
    let ExecSession {
        mut stdin,
        mut output,
        resize,
        exit_code,
    } = session;
    loop {
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(Ok((channel, bytes))) => {
                    if sink.send(frame(channel, &bytes)).await.is_err() {
                        return;
                    }
                }
                Some(Err(_)) | None => break,
            },
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(data))) if !data.is_empty() => match data[0] {
                    STDIN => {
                        if let Some(input) = stdin.as_mut()
                            && input.write_all(&data[1..]).await.is_err()
                        {
                            stdin = None;
                        }
                    }
                    RESIZE => {
                        if let Some((width, height)) = terminal_size(&data[1..]) {
                            resize(width, height).await;
                        }
                    }
                    CLOSE if v5 && data.get(1) == Some(&STDIN) => {
                        if let Some(mut input) = stdin.take() {
                            let _ = input.shutdown().await;
                        }
                    }
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    drop(stdin);
    let status = final_status(command, &exit_code.await);
    let _ = sink.send(frame(ERROR, status.to_string().as_bytes())).await;
    // A normal closure: clients (gorilla's, in kubectl) take any other as the streams failing.
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        })))
        .await;
    let _ = sink.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_come_from_the_query() {
        let options =
            ExecOptions::parse(Some("command=sh&command=-c&command=echo%20hi&container=web&stdin=true&stdout=true&stderr=true&tty=true"))
                .unwrap();
        assert_eq!(
            options,
            ExecOptions {
                command: vec!["sh".into(), "-c".into(), "echo hi".into()],
                container: Some("web".into()),
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true,
            }
        );
        for bad in [None, Some("stdout=true"), Some("command=ls")] {
            assert_eq!(ExecOptions::parse(bad).unwrap_err().code, 400, "{bad:?}");
        }
    }

    #[test]
    fn the_final_status_carries_the_exit_code_as_kubelet_writes_it() {
        let command = vec!["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        assert_eq!(final_status(&command, &Ok(0))["status"], "Success");
        let failed = final_status(&command, &Ok(3));
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(
            failed["details"]["causes"][0],
            json!({"reason": "ExitCode", "message": "3"})
        );
        assert_eq!(
            failed["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        assert_eq!(
            terminal_size(br#"{"Width":120,"Height":40}"#),
            Some((120, 40))
        );
        assert_eq!(terminal_size(b"{}"), None);
    }
}

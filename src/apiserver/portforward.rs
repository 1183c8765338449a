//! `pods/portforward` over WebSocket, as kube-apiserver serves it to kube-rs and other clients
//! of the `v4.channel.k8s.io` protocol: a control plane provider reaches a node's etcd through
//! the workload cluster's API server this way, from any host that reaches the load balancer.
//!
//! The protocol: each requested port has two channels, data (`2i`) and error (`2i + 1`); the
//! server first sends on each a frame of the channel number and the port (u16, little
//! endian); after that every binary message is a channel byte followed by the bytes. An error
//! (the port refused the connection) is text on the error channel.
//!
//! Where kube-apiserver asks the Pod's kubelet, which forwards inside the Pod's network
//! namespace, this server connects to the Pod's IP itself: capictl's static Pods share their
//! node's network, which every API server of the cluster reaches. (kubectl speaks SPDY:
//! [`super::spdy`]; since 1.30 it first offers SPDY tunnelled in WebSocket, which is refused
//! here, and then falls back to SPDY.)

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::status::ApiError;

/// The channel protocol served (kube-rs offers v5 and v4; v5's close frames are not needed).
pub const PROTOCOL: &str = "v4.channel.k8s.io";
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// The ports a request asks for: `?ports=2379` (comma-separated, or the parameter repeated).
pub fn ports(query: Option<&str>) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
    for (key, value) in pairs {
        if key != "ports" {
            continue;
        }
        for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.parse::<u16>() {
                Ok(p) if p > 0 => ports.push(p),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "invalid port {part:?} in query parameter ports: a port is 1 to 65535"
                    )));
                }
            }
        }
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request(
            "query parameter \"ports\" is required: say which of the Pod's ports to forward",
        ));
    }
    Ok(ports)
}

/// Where the Pod's ports are: its IP, once it runs.
pub fn pod_address(pod: &Value) -> Result<IpAddr, ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    if pod["status"]["phase"].as_str() != Some("Running") {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade connection: pod {name} is not running"
        )));
    }
    pod["status"]["podIP"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to upgrade connection: pod {name} has no IP yet"
            ))
        })
}

/// The WebSocket handshake's answer and the subprotocol chosen — the first of `protocols`
/// (in this server's order of preference) that the client offers — or why the request is not
/// one this server takes. `what` names the subresource and its other transport in the error.
pub fn handshake(
    headers: &HeaderMap,
    protocols: &[&'static str],
    what: &str,
) -> Result<(HeaderMap, &'static str), ApiError> {
    let has = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return Err(ApiError::bad_request(format!(
            "{what} is served over WebSocket with the {} protocol or over SPDY/3.1",
            protocols.join(" or ")
        )));
    }
    let Some(protocol) = protocols
        .iter()
        .find(|p| has(header::SEC_WEBSOCKET_PROTOCOL, p))
    else {
        return Err(ApiError::bad_request(format!(
            "no WebSocket subprotocol this server speaks was offered: offer {}",
            protocols.join(" or ")
        )));
    };
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .ok_or_else(|| ApiError::bad_request("the WebSocket handshake has no Sec-WebSocket-Key"))?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut answer = HeaderMap::new();
    answer.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    answer.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    answer.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).expect("base64 is a header value"),
    );
    answer.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(protocol),
    );
    Ok((answer, protocol))
}

/// Answers the handshake and, once the connection is upgraded, forwards `ports` of `address`.
pub fn serve(req: Request, address: IpAddr, ports: Vec<u16>) -> Result<Response, ApiError> {
    let (answer, _) = handshake(
        req.headers(),
        &[PROTOCOL],
        "pods/portforward (kube-rs speaks WebSocket, kubectl SPDY)",
    )?;
    Ok(upgrade(
        req,
        answer,
        "pods/portforward",
        move |ws| async move { forward(ws, address, &ports).await },
    ))
}

/// The connection after a WebSocket handshake.
pub type Upgraded = WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

/// Answers a request with the handshake's `answer`, and runs `session` on the upgraded
/// connection.
pub fn upgrade<F, Fut>(
    mut req: Request,
    answer: HeaderMap,
    what: &'static str,
    session: F,
) -> Response
where
    F: FnOnce(Upgraded) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => {
                let ws = WebSocketStream::from_raw_socket(
                    hyper_util::rt::TokioIo::new(upgraded),
                    Role::Server,
                    None,
                )
                .await;
                session(ws).await;
            }
            Err(e) => tracing::debug!(error = %e, "{what}: the upgrade did not happen"),
        }
    });
    let mut response = (StatusCode::SWITCHING_PROTOCOLS, Body::empty()).into_response();
    response.headers_mut().extend(answer);
    response
}

pub fn frame(channel: u8, bytes: &[u8]) -> Message {
    let mut data = Vec::with_capacity(bytes.len() + 1);
    data.push(channel);
    data.extend_from_slice(bytes);
    Message::Binary(data.into())
}

/// Pipes each port's TCP connection through its channels until the client goes or every port
/// has closed.
async fn forward<S>(ws: WebSocketStream<S>, address: IpAddr, ports: &[u16])
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut incoming) = ws.split();
    let (out, mut outgoing) = tokio::sync::mpsc::channel::<Message>(16);
    let mut writers = Vec::new();
    let mut open = 0usize;
    for (i, port) in ports.iter().enumerate() {
        let data = (2 * i) as u8;
        for channel in [data, data + 1] {
            if sink
                .send(frame(channel, &port.to_le_bytes()))
                .await
                .is_err()
            {
                return;
            }
        }
        let target = SocketAddr::new(address, *port);
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(target)).await {
            Ok(Ok(tcp)) => {
                let (mut read, write) = tcp.into_split();
                writers.push(Some(write));
                open += 1;
                let out = out.clone();
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 32 * 1024];
                    loop {
                        match read.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if out.send(frame(data, &buffer[..n])).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    // An empty frame tells the loop below this port has closed.
                    let _ = out.send(frame(data, &[])).await;
                });
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".into(),
                };
                let message =
                    format!("error forwarding port {port} to {address}: dial tcp {target}: {why}");
                let _ = sink.send(frame(data + 1, message.as_bytes())).await;
                writers.push(None);
            }
        }
    }
    drop(out);
    if open == 0 {
        let _ = sink.close().await;
        return;
    }
    loop {
        tokio::select! {
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(data))) if !data.is_empty() => {
                    let port = usize::from(data[0] / 2);
                    // Bytes on an error channel, or for a port that is gone, go nowhere.
                    if data[0] % 2 == 0
                        && let Some(Some(writer)) = writers.get_mut(port)
                        && writer.write_all(&data[1..]).await.is_err()
                    {
                        writers[port] = None;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            message = outgoing.recv() => match message {
                Some(Message::Binary(data)) if data.len() == 1 => {
                    open -= 1;
                    if open == 0 {
                        break;
                    }
                }
                Some(message) => {
                    if sink.send(message).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
        }
    }
    let _ = sink.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_come_from_the_query() {
        assert_eq!(ports(Some("ports=2379")).unwrap(), vec![2379]);
        assert_eq!(
            ports(Some("ports=2379,6443&ports=10250")).unwrap(),
            vec![2379, 6443, 10250]
        );
        for bad in [None, Some("ports="), Some("ports=0"), Some("ports=http")] {
            assert_eq!(ports(bad).unwrap_err().code, 400, "{bad:?}");
        }
    }

    #[test]
    fn only_a_running_pod_with_an_ip_is_forwarded_to() {
        let pod = |phase: &str, ip: Option<&str>| json!({"metadata": {"name": "etcd-a"}, "status": {"phase": phase, "podIP": ip}});
        assert_eq!(
            pod_address(&pod("Running", Some("172.18.0.3"))).unwrap(),
            "172.18.0.3".parse::<IpAddr>().unwrap()
        );
        let pending = pod_address(&pod("Pending", None)).unwrap_err();
        assert!(
            pending.message.contains("not running"),
            "{}",
            pending.message
        );
        assert!(pod_address(&pod("Running", None)).is_err());
    }
}

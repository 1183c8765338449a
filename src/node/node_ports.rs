//! The node ports of NodePort Services, served by capictl's node agent in user space as
//! kube-proxy's userspace mode served them: a listener on every address of the node for each
//! TCP and UDP node port, each TCP connection (each UDP client, for as long as it keeps
//! talking) forwarded to one of the Service's ready endpoints, picked at random. (kube-proxy
//! programs the node's `nat` table instead; capictl's unprivileged node containers hold no
//! `NET_ADMIN`.) [`super::service_proxy::node_ports`] says what to serve.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, UdpSocket};

use super::service_proxy::Transport;

/// The endpoints a node port leads to: (address, port).
type Targets = Arc<RwLock<Vec<(String, i32)>>>;

/// How long a UDP client's flow to its endpoint lasts without an answer from the endpoint
/// (the kernel's conntrack keeps an unanswered UDP flow 30 s).
const UDP_IDLE: Duration = Duration::from_secs(30);

/// The node ports this node serves.
#[derive(Default)]
pub struct NodePorts {
    open: HashMap<(Transport, u16), (tokio::task::JoinHandle<()>, Targets)>,
    /// Ports that could not be opened (something else listens there), said once.
    refused: HashSet<(Transport, u16)>,
}

impl Drop for NodePorts {
    fn drop(&mut self) {
        self.open.values().for_each(|(task, _)| task.abort());
    }
}

impl NodePorts {
    /// Serves exactly the node ports of `table`, each to its endpoints.
    pub async fn serve(&mut self, table: BTreeMap<(Transport, u16), Vec<(String, i32)>>) {
        self.open.retain(|key, (task, _)| {
            let keep = table.contains_key(key);
            if !keep {
                task.abort();
            }
            keep
        });
        self.refused.retain(|key| table.contains_key(key));
        for ((transport, port), endpoints) in table {
            if let Some((_, targets)) = self.open.get(&(transport, port)) {
                *targets.write().unwrap() = endpoints;
                continue;
            }
            let targets: Targets = Arc::new(RwLock::new(endpoints));
            let task = match transport {
                Transport::Tcp => TcpListener::bind(("0.0.0.0", port))
                    .await
                    .map(|l| tokio::spawn(forward(l, targets.clone()))),
                Transport::Udp => UdpSocket::bind(("0.0.0.0", port))
                    .await
                    .map(|s| tokio::spawn(relay(Arc::new(s), targets.clone()))),
            };
            match task {
                Ok(task) => {
                    self.open.insert((transport, port), (task, targets));
                }
                Err(e) => {
                    if self.refused.insert((transport, port)) {
                        tracing::warn!(port, ?transport, error = %e, "kubelet: a Service's node port cannot be opened on this node");
                    }
                }
            }
        }
    }
}

/// One of the targets, picked at random; None when there is none.
fn pick(targets: &Targets) -> Option<String> {
    let targets = targets.read().unwrap();
    let (address, port) = match targets.len() {
        0 => return None,
        n => targets[rand::random_range(0..n)].clone(),
    };
    Some(address_of(&address, port))
}

fn address_of(address: &str, port: i32) -> String {
    super::kubeadm::pki::join_host_port(address, port as u16)
}

/// Whether `address` is still one of the targets.
fn targeted(targets: &Targets, address: &str) -> bool {
    targets
        .read()
        .unwrap()
        .iter()
        .any(|(a, p)| address_of(a, *p) == address)
}

/// Accepts connections until aborted, each forwarded to an endpoint picked at random; one that
/// comes while there is none is closed, as kube-proxy rejects it.
async fn forward(listener: TcpListener, targets: Targets) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        let Some(address) = pick(&targets) else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(address).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

/// A UDP client's flow: its socket toward the endpoint it was given.
struct Flow {
    socket: Arc<UdpSocket>,
    endpoint: String,
}

type Flows = Arc<Mutex<HashMap<SocketAddr, Flow>>>;

/// Relays datagrams until aborted: each client gets a socket of its own toward an endpoint
/// picked at random on its first datagram, kept while the flow is active and the endpoint is
/// still one of the Service's (kube-proxy clears a removed endpoint's UDP conntrack entries so
/// that its clients move on, rather than send into a Pod that is gone), and the endpoint's
/// answers go back to the client from the node port; a datagram that comes while there is no
/// endpoint is dropped.
async fn relay(listener: Arc<UdpSocket>, targets: Targets) {
    let flows: Flows = Arc::default();
    let mut buffer = vec![0u8; 65_536];
    loop {
        let Ok((n, client)) = listener.recv_from(&mut buffer).await else {
            continue;
        };
        let known = flows
            .lock()
            .unwrap()
            .get(&client)
            .filter(|f| targeted(&targets, &f.endpoint))
            .map(|f| f.socket.clone());
        let upstream = match known {
            Some(u) => u,
            None => {
                let Some(endpoint) = pick(&targets) else {
                    continue;
                };
                let Ok(socket) = UdpSocket::bind("0.0.0.0:0").await else {
                    continue;
                };
                if socket.connect(&endpoint).await.is_err() {
                    continue;
                }
                let socket = Arc::new(socket);
                let flow = Flow {
                    socket: socket.clone(),
                    endpoint,
                };
                flows.lock().unwrap().insert(client, flow);
                tokio::spawn(answer(
                    socket.clone(),
                    listener.clone(),
                    client,
                    flows.clone(),
                ));
                socket
            }
        };
        let _ = upstream.send(&buffer[..n]).await;
    }
}

/// Sends an endpoint's answers back to `client` until the flow is idle for [`UDP_IDLE`], then
/// forgets it, unless the client has a newer flow by then.
async fn answer(
    upstream: Arc<UdpSocket>,
    listener: Arc<UdpSocket>,
    client: SocketAddr,
    flows: Flows,
) {
    let mut buffer = vec![0u8; 65_536];
    while let Ok(Ok(n)) = tokio::time::timeout(UDP_IDLE, upstream.recv(&mut buffer)).await {
        let _ = listener.send_to(&buffer[..n], client).await;
    }
    let mut flows = flows.lock().unwrap();
    if flows
        .get(&client)
        .is_some_and(|f| Arc::ptr_eq(&f.socket, &upstream))
    {
        flows.remove(&client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A port free on every address now (bound and let go).
    fn free_port() -> u16 {
        std::net::TcpListener::bind("0.0.0.0:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A UDP endpoint on loopback that answers "`name` got <datagram>"; its port.
    async fn udp_endpoint(name: &'static str) -> u16 {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = socket.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut buffer = [0u8; 64];
            loop {
                let (n, from) = socket.recv_from(&mut buffer).await.unwrap();
                let reply = [format!("{name} got ").as_bytes(), &buffer[..n]].concat();
                socket.send_to(&reply, from).await.unwrap();
            }
        });
        port
    }

    #[tokio::test]
    async fn tcp_and_udp_node_ports_reach_an_endpoint_and_follow_the_table() {
        // Endpoints that answer with their own name.
        let tcp_endpoint = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp_target = tcp_endpoint.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut c, _) = tcp_endpoint.accept().await.unwrap();
                c.write_all(b"tcp endpoint").await.unwrap();
            }
        });
        let udp_target = udp_endpoint("udp endpoint").await;
        let (tcp_port, udp_port) = (free_port(), free_port());
        let to = |port: u16| vec![("127.0.0.1".to_string(), i32::from(port))];
        let mut ports = NodePorts::default();
        ports
            .serve(BTreeMap::from([
                ((Transport::Tcp, tcp_port), to(tcp_target)),
                ((Transport::Udp, udp_port), to(udp_target)),
            ]))
            .await;

        let mut tcp = TcpStream::connect(("127.0.0.1", tcp_port)).await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        assert_eq!(answer, "tcp endpoint");

        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(("127.0.0.1", udp_port)).await.unwrap();
        let mut buffer = [0u8; 64];
        for ask in ["one", "two"] {
            client.send(ask.as_bytes()).await.unwrap();
            let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buffer))
                .await
                .expect("an answer through the UDP node port")
                .unwrap();
            assert_eq!(
                std::str::from_utf8(&buffer[..n]).unwrap(),
                format!("udp endpoint got {ask}")
            );
        }

        // The endpoint leaves the Service for another: the client's flow moves to the new one
        // (the old one, still answering, gets nothing more).
        let moved_port = udp_endpoint("new endpoint").await;
        ports
            .serve(BTreeMap::from([
                ((Transport::Tcp, tcp_port), to(tcp_target)),
                ((Transport::Udp, udp_port), to(moved_port)),
            ]))
            .await;
        client.send(b"three").await.unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buffer))
            .await
            .expect("an answer from the new endpoint")
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&buffer[..n]).unwrap(),
            "new endpoint got three"
        );

        // A port the table no longer has is closed.
        ports
            .serve(BTreeMap::from([(
                (Transport::Udp, udp_port),
                to(moved_port),
            )]))
            .await;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", tcp_port)).await.is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the TCP node port stays open"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

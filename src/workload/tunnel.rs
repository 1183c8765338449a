//! A port on 127.0.0.1 that reaches a workload Pod's port through the workload cluster's
//! API server (`pods/portforward`), as upstream's control plane provider reaches etcd: from any
//! host that reaches the cluster's load balancer, whatever the nodes' network. Each connection
//! accepted here opens its own forward; the port closes when the [`Tunnel`] is dropped.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::net::TcpListener;

pub struct Tunnel {
    /// Where to connect on this host.
    pub local: SocketAddr,
    listener: tokio::task::AbortHandle,
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// Opens a local port forwarding to `port` of the Pod `pod`.
pub async fn open(pods: Api<Pod>, pod: String, port: u16) -> std::io::Result<Tunnel> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let (pods, pod) = (pods.clone(), pod.clone());
            tokio::spawn(async move {
                let mut forwarder = match pods.portforward(&pod, &[port]).await {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::debug!(%pod, port, error = %e, "port forward refused");
                        return;
                    }
                };
                let Some(mut remote) = forwarder.take_stream(port) else {
                    return;
                };
                if let Err(e) = tokio::io::copy_bidirectional(&mut tcp, &mut remote).await {
                    tracing::debug!(%pod, port, error = %e, "port forward ended");
                }
                drop(remote);
                forwarder.abort();
            });
        }
    });
    Ok(Tunnel {
        local,
        listener: task.abort_handle(),
    })
}

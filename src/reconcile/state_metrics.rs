//! Cluster API's state as series, under the names upstream's kube-state-metrics configuration
//! gives them (`capi_cluster_status_phase`, `capi_machine_status_condition`,
//! `capi_machinedeployment_spec_replicas`...), so that its dashboards and alerts work: read
//! from the controllers' caches when scraped, never from the API.
//!
//! Beside those: `capi_cluster_certificates_expiry_timestamp_seconds`, the earliest expiry of a
//! cluster's control plane certificates as its Machines record it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::api::{
    CLUSTER_NAME_LABEL, Cluster, KubeadmControlPlane, Machine, MachineDeployment,
    MachineHealthCheck, MachinePool, MachineSet,
};

type Labels = Vec<(&'static str, String)>;

/// The samples of one series.
struct Series {
    help: &'static str,
    samples: Vec<(Labels, f64)>,
}

/// The samples of one scrape, by series name.
#[derive(Default)]
pub struct Samples {
    families: BTreeMap<&'static str, Series>,
}

impl Samples {
    fn add(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.families
            .entry(name)
            .or_insert_with(|| Series {
                help,
                samples: Vec::new(),
            })
            .samples
            .push((labels, value));
    }

    /// One series per status value of each condition, 1 for the one it has.
    fn conditions(&mut self, name: &'static str, base: &Labels, conditions: Option<&[Condition]>) {
        for c in conditions.unwrap_or_default() {
            for status in ["True", "False", "Unknown"] {
                let mut labels = base.clone();
                labels.push(("type", c.type_.clone()));
                labels.push(("status", status.to_string()));
                let value = f64::from(u8::from(c.status == status));
                self.add(
                    name,
                    "The object's conditions, 1 for the status each has",
                    labels,
                    value,
                );
            }
        }
    }

    /// One series per phase of `all`, 1 for the object's.
    fn phase(&mut self, name: &'static str, base: &Labels, phase: Option<&str>, all: &[&str]) {
        for p in all {
            let mut labels = base.clone();
            labels.push(("phase", p.to_string()));
            let value = f64::from(u8::from(phase == Some(*p)));
            self.add(
                name,
                "The object's phase, 1 for the one it is in",
                labels,
                value,
            );
        }
    }

    fn replicas(&mut self, name: &'static str, base: &Labels, replicas: Option<i32>) {
        if let Some(n) = replicas {
            self.add(name, "Replicas", base.clone(), f64::from(n));
        }
    }
}

/// A kind whose objects are series.
pub trait StateSeries: Clone + Send + Sync + 'static {
    fn samples(&self, out: &mut Samples);
}

/// What one scrape reads: the cached objects of one kind.
trait Source: Send + Sync {
    fn collect(&self, out: &mut Samples);
}

impl<K> Source for Store<K>
where
    K: StateSeries + kube::Resource<DynamicType = ()>,
{
    fn collect(&self, out: &mut Samples) {
        for object in self.state() {
            object.samples(out);
        }
    }
}

/// The caches the series are read from, added as the controllers start.
#[derive(Default)]
pub struct StateMetrics {
    sources: Mutex<Vec<Box<dyn Source>>>,
}

impl std::fmt::Debug for StateMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateMetrics")
    }
}

impl StateMetrics {
    /// Makes the objects of `store` series.
    pub fn add<K>(&self, store: Store<K>)
    where
        K: StateSeries + kube::Resource<DynamicType = ()>,
    {
        self.sources.lock().unwrap().push(Box::new(store));
    }

    /// Makes the Machines of `store` series, and the earliest certificate expiry of each
    /// cluster they belong to.
    pub fn add_machines(&self, store: Store<Machine>) {
        self.add(store.clone());
        self.sources.lock().unwrap().push(Box::new(Expiries(store)));
    }

    /// Every sample of every source, grouped by series.
    pub fn samples(&self) -> Samples {
        let mut out = Samples::default();
        for source in self.sources.lock().unwrap().iter() {
            source.collect(&mut out);
        }
        out
    }
}

impl Collector for StateMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, series) in self.samples().families {
            let mut family =
                encoder.encode_descriptor(name, series.help, None, MetricType::Gauge)?;
            for (labels, value) in series.samples {
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

fn base<K: kube::Resource>(object: &K) -> Labels {
    vec![
        ("name", object.name_any()),
        ("namespace", object.namespace().unwrap_or_default()),
        ("uid", object.uid().unwrap_or_default()),
    ]
}

fn seconds(time: &Time) -> f64 {
    time.0.as_second() as f64
}

impl StateSeries for Cluster {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let mut info = base.clone();
        let topology = self.spec.topology.as_ref();
        info.push((
            "topology_version",
            topology.map(|t| t.version.clone()).unwrap_or_default(),
        ));
        info.push((
            "topology_class",
            topology
                .map(|t| t.class_ref.name.clone())
                .unwrap_or_default(),
        ));
        let endpoint = self.spec.control_plane_endpoint.as_ref();
        info.push((
            "control_plane_endpoint_host",
            endpoint.and_then(|e| e.host.clone()).unwrap_or_default(),
        ));
        info.push((
            "control_plane_endpoint_port",
            endpoint
                .and_then(|e| e.port)
                .map(|p| p.to_string())
                .unwrap_or_default(),
        ));
        out.add(
            "capi_cluster_info",
            "Information about a Cluster",
            info,
            1.0,
        );
        if let Some(created) = &self.metadata.creation_timestamp {
            out.add(
                "capi_cluster_created",
                "When the Cluster was created (Unix seconds)",
                base.clone(),
                seconds(created),
            );
        }
        out.add(
            "capi_cluster_spec_paused",
            "Whether the Cluster is paused",
            base.clone(),
            f64::from(u8::from(self.spec.paused == Some(true))),
        );
        let status = self.status.as_ref();
        out.phase(
            "capi_cluster_status_phase",
            &base,
            status.and_then(|s| s.phase.as_deref()),
            &[
                "Pending",
                "Provisioning",
                "Provisioned",
                "Deleting",
                "Failed",
                "Unknown",
            ],
        );
        out.conditions(
            "capi_cluster_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
    }
}

impl StateSeries for Machine {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let mut info = base.clone();
        info.push(("cluster_name", self.spec.cluster_name.clone()));
        info.push((
            "kubernetes_version",
            self.spec.version.clone().unwrap_or_default(),
        ));
        info.push((
            "provider_id",
            self.spec.provider_id.clone().unwrap_or_default(),
        ));
        let status = self.status.as_ref();
        info.push((
            "node_name",
            status
                .and_then(|s| s.node_ref.as_ref())
                .map(|n| n.name.clone())
                .unwrap_or_default(),
        ));
        info.push((
            "control_plane",
            self.labels()
                .contains_key(crate::api::CONTROL_PLANE_LABEL)
                .to_string(),
        ));
        out.add(
            "capi_machine_info",
            "Information about a Machine",
            info,
            1.0,
        );
        if let Some(created) = &self.metadata.creation_timestamp {
            out.add(
                "capi_machine_created",
                "When the Machine was created (Unix seconds)",
                base.clone(),
                seconds(created),
            );
        }
        out.phase(
            "capi_machine_status_phase",
            &base,
            status.and_then(|s| s.phase.as_deref()),
            &[
                "Pending",
                "Provisioning",
                "Provisioned",
                "Running",
                "Deleting",
                "Deleted",
                "Failed",
                "Unknown",
            ],
        );
        out.conditions(
            "capi_machine_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
        if let Some(expiry) = status.and_then(|s| s.certificates_expiry_date.as_ref()) {
            out.add(
                "capi_machine_status_certificatesexpirydate",
                "When the Machine's control plane certificates expire (Unix seconds)",
                base.clone(),
                seconds(expiry),
            );
        }
    }
}

/// The earliest certificate expiry of each cluster's Machines, one series per cluster.
struct Expiries(Store<Machine>);

impl Source for Expiries {
    fn collect(&self, out: &mut Samples) {
        certificate_expiries(&self.0.state(), out);
    }
}

fn certificate_expiries(machines: &[std::sync::Arc<Machine>], out: &mut Samples) {
    let mut earliest: BTreeMap<(String, String), f64> = BTreeMap::new();
    for m in machines {
        let Some(expiry) = m
            .status
            .as_ref()
            .and_then(|s| s.certificates_expiry_date.as_ref())
        else {
            continue;
        };
        let cluster = m
            .labels()
            .get(CLUSTER_NAME_LABEL)
            .cloned()
            .unwrap_or_else(|| m.spec.cluster_name.clone());
        let at = seconds(expiry);
        earliest
            .entry((m.namespace().unwrap_or_default(), cluster))
            .and_modify(|e| *e = e.min(at))
            .or_insert(at);
    }
    for ((namespace, name), at) in earliest {
        out.add(
            "capi_cluster_certificates_expiry_timestamp_seconds",
            "When the first of a cluster's control plane certificates expires (Unix seconds)",
            vec![("name", name), ("namespace", namespace)],
            at,
        );
    }
}

impl StateSeries for MachineSet {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let status = self.status.as_ref();
        for (name, replicas) in [
            ("capi_machineset_spec_replicas", self.spec.replicas),
            (
                "capi_machineset_status_replicas",
                status.and_then(|s| s.replicas),
            ),
            (
                "capi_machineset_status_ready_replicas",
                status.and_then(|s| s.ready_replicas),
            ),
            (
                "capi_machineset_status_available_replicas",
                status.and_then(|s| s.available_replicas),
            ),
        ] {
            out.replicas(name, &base, replicas);
        }
        out.conditions(
            "capi_machineset_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
    }
}

impl StateSeries for MachinePool {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let status = self.status.as_ref();
        out.replicas("capi_machinepool_spec_replicas", &base, self.spec.replicas);
        for (name, replicas) in [
            (
                "capi_machinepool_status_replicas",
                status.and_then(|s| s.replicas),
            ),
            (
                "capi_machinepool_status_replicas_ready",
                status.and_then(|s| s.ready_replicas),
            ),
            (
                "capi_machinepool_status_replicas_available",
                status.and_then(|s| s.available_replicas),
            ),
        ] {
            out.replicas(name, &base, replicas);
        }
        let phase = status
            .and_then(|s| s.phase)
            .and_then(|p| serde_json::to_value(p).ok());
        out.phase(
            "capi_machinepool_status_phase",
            &base,
            phase.as_ref().and_then(|p| p.as_str()),
            &["ScalingUp", "ScalingDown", "Running", "Failed", "Unknown"],
        );
        out.conditions(
            "capi_machinepool_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
    }
}

impl StateSeries for MachineDeployment {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let status = self.status.as_ref();
        out.replicas(
            "capi_machinedeployment_spec_replicas",
            &base,
            self.spec.replicas,
        );
        out.add(
            "capi_machinedeployment_spec_paused",
            "Whether the MachineDeployment is paused",
            base.clone(),
            f64::from(u8::from(self.spec.paused == Some(true))),
        );
        for (name, replicas) in [
            (
                "capi_machinedeployment_status_replicas",
                status.and_then(|s| s.replicas),
            ),
            (
                "capi_machinedeployment_status_ready_replicas",
                status.and_then(|s| s.ready_replicas),
            ),
            (
                "capi_machinedeployment_status_available_replicas",
                status.and_then(|s| s.available_replicas),
            ),
            (
                "capi_machinedeployment_status_up_to_date_replicas",
                status.and_then(|s| s.up_to_date_replicas),
            ),
        ] {
            out.replicas(name, &base, replicas);
        }
        out.phase(
            "capi_machinedeployment_status_phase",
            &base,
            status.and_then(|s| s.phase.as_deref()),
            &["ScalingUp", "ScalingDown", "Running", "Failed", "Unknown"],
        );
        out.conditions(
            "capi_machinedeployment_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
    }
}

impl StateSeries for KubeadmControlPlane {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let status = self.status.as_ref();
        let mut info = base.clone();
        info.push(("version", self.spec.version.clone()));
        out.add(
            "capi_kubeadmcontrolplane_info",
            "Information about a KubeadmControlPlane",
            info,
            1.0,
        );
        for (name, replicas) in [
            ("capi_kubeadmcontrolplane_spec_replicas", self.spec.replicas),
            (
                "capi_kubeadmcontrolplane_status_replicas",
                status.and_then(|s| s.replicas),
            ),
            (
                "capi_kubeadmcontrolplane_status_ready_replicas",
                status.and_then(|s| s.ready_replicas),
            ),
            (
                "capi_kubeadmcontrolplane_status_available_replicas",
                status.and_then(|s| s.available_replicas),
            ),
            (
                "capi_kubeadmcontrolplane_status_up_to_date_replicas",
                status.and_then(|s| s.up_to_date_replicas),
            ),
        ] {
            out.replicas(name, &base, replicas);
        }
        out.conditions(
            "capi_kubeadmcontrolplane_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
    }
}

impl StateSeries for MachineHealthCheck {
    fn samples(&self, out: &mut Samples) {
        let base = base(self);
        let status = self.status.as_ref();
        for (name, replicas) in [
            (
                "capi_machinehealthcheck_status_expected_machines",
                status.and_then(|s| s.expected_machines),
            ),
            (
                "capi_machinehealthcheck_status_current_healthy",
                status.and_then(|s| s.current_healthy),
            ),
            (
                "capi_machinehealthcheck_status_remediations_allowed",
                status.and_then(|s| s.remediations_allowed),
            ),
        ] {
            out.replicas(name, &base, replicas);
        }
        out.conditions(
            "capi_machinehealthcheck_status_condition",
            &base,
            status.and_then(|s| s.conditions.as_deref()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(name: &str, phase: &str, ready: &str, expiry: Option<&str>) -> Machine {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "labels": {CLUSTER_NAME_LABEL: "prod"}},
            "spec": {"clusterName": "prod", "version": "v1.30.4",
                     "bootstrap": {}, "infrastructureRef": {"apiGroup": "x", "kind": "X", "name": name}},
            "status": {
                "phase": phase,
                "conditions": [{"type": "Ready", "status": ready, "reason": "R", "message": "",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "certificatesExpiryDate": expiry,
            },
        }))
        .unwrap()
    }

    fn value(samples: &Samples, name: &str, want: &[(&str, &str)]) -> Option<f64> {
        samples
            .families
            .get(name)?
            .samples
            .iter()
            .find_map(|(labels, v)| {
                want.iter()
                    .all(|(k, w)| labels.iter().any(|(lk, lv)| lk == k && lv == w))
                    .then_some(*v)
            })
    }

    #[test]
    fn machines_are_series_with_their_phase_conditions_and_the_clusters_first_expiry() {
        let machines = [
            machine("a", "Running", "True", Some("2027-03-01T00:00:00Z")),
            machine("b", "Provisioning", "False", Some("2027-01-01T00:00:00Z")),
        ];
        let mut out = Samples::default();
        for m in &machines {
            m.samples(&mut out);
        }
        let arcs: Vec<_> = machines.iter().cloned().map(std::sync::Arc::new).collect();
        certificate_expiries(&arcs, &mut out);

        let phase = |name, phase| {
            value(
                &out,
                "capi_machine_status_phase",
                &[("name", name), ("phase", phase)],
            )
        };
        assert_eq!(phase("a", "Running"), Some(1.0));
        assert_eq!(phase("a", "Provisioning"), Some(0.0));
        assert_eq!(phase("b", "Provisioning"), Some(1.0));
        let ready = |name, status| {
            value(
                &out,
                "capi_machine_status_condition",
                &[("name", name), ("type", "Ready"), ("status", status)],
            )
        };
        assert_eq!(ready("a", "True"), Some(1.0));
        assert_eq!(ready("b", "False"), Some(1.0));
        assert_eq!(ready("b", "True"), Some(0.0));
        // The cluster's first expiry is b's, the earlier one.
        assert_eq!(
            value(
                &out,
                "capi_cluster_certificates_expiry_timestamp_seconds",
                &[("name", "prod")]
            ),
            Some(1_798_761_600.0)
        );
    }
}

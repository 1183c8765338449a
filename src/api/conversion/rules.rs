//! Where every field upstream moved, renamed or retyped between v1beta1 and v1beta2 lives in
//! each, kind by kind (upstream's `api/*/v1beta1/conversion.go` and the conversion webhooks).

use super::engine::How::{self, *};
use super::engine::Rule;

const STRING: &str = r#"{"type": "string"}"#;
const BOOLEAN: &str = r#"{"type": "boolean"}"#;
const INTEGER: &str = r#"{"type": "integer", "format": "int32"}"#;
const DATE_TIME: &str = r#"{"type": "string", "format": "date-time"}"#;
const NETWORKING: &str = r#"{"type": "object", "properties": {
    "dnsDomain": {"type": "string"}, "podSubnet": {"type": "string"}, "serviceSubnet": {"type": "string"}}}"#;

fn r(old: &str, new: &str, how: How) -> Rule {
    Rule::new(old, new, how)
}

fn old_only(old: &str, schema: &'static str) -> Rule {
    Rule::new(old, "", OldOnly(schema))
}

fn new_only(new: &str) -> Rule {
    Rule::new("", new, NewOnly)
}

fn under(rules: Vec<Rule>, old: &str, new: &str) -> Vec<Rule> {
    rules.iter().map(|rule| rule.under(old, new)).collect()
}

/// The v1beta1 conditions and failure fields, kept under `status.deprecated.v1beta1`; the
/// v1beta2 conditions, kept under `status.v1beta2` in v1beta1.
fn conditions() -> Vec<Rule> {
    let mut rules = vec![
        r(
            "status.failureReason",
            "status.deprecated.v1beta1.failureReason",
            Same,
        ),
        r(
            "status.failureMessage",
            "status.deprecated.v1beta1.failureMessage",
            Same,
        ),
        new_only("status.initialization"),
    ];
    rules.extend(conditions_only());
    rules
}

/// [`conditions`] for a kind that never had failure fields (a ClusterResourceSet).
fn conditions_only() -> Vec<Rule> {
    vec![
        r(
            "status.conditions",
            "status.deprecated.v1beta1.conditions",
            Same,
        ),
        r("status.v1beta2.conditions", "status.conditions", Same),
        // What is left there once the fields above moved is nothing this kind had.
        new_only("status.deprecated"),
    ]
}

/// The replica counters whose meaning changed: v1beta1's under `status.deprecated.v1beta1`,
/// v1beta2's under `status.v1beta2` in v1beta1.
fn replica_counters() -> Vec<Rule> {
    replica_counters_of(&[
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
        "updatedReplicas",
        "fullyLabeledReplicas",
    ])
}

/// [`replica_counters`] for a kind whose v1beta1 status had only the `old` ones.
fn replica_counters_of(old: &[&str]) -> Vec<Rule> {
    let mut rules = vec![];
    for counter in old {
        rules.push(r(
            &format!("status.{counter}"),
            &format!("status.deprecated.v1beta1.{counter}"),
            Same,
        ));
    }
    for counter in ["readyReplicas", "availableReplicas", "upToDateReplicas"] {
        rules.push(r(
            &format!("status.v1beta2.{counter}"),
            &format!("status.{counter}"),
            Same,
        ));
    }
    rules
}

/// A Machine's deletion timeouts, flat in v1beta1, under `deletion` in v1beta2.
fn deletion_timeouts() -> Vec<Rule> {
    [
        "nodeDrainTimeout",
        "nodeVolumeDetachTimeout",
        "nodeDeletionTimeout",
    ]
    .into_iter()
    .map(|t| r(t, &format!("deletion.{t}Seconds"), Seconds))
    .collect()
}

/// `MachineSpec`.
fn machine_spec() -> Vec<Rule> {
    let mut rules = vec![
        r("bootstrap.configRef", "bootstrap.configRef", ContractRef),
        r("infrastructureRef", "infrastructureRef", ContractRef),
    ];
    rules.extend(deletion_timeouts());
    rules
}

/// A MachineHealthCheck's checks and remediation: flat in v1beta1 (as in a MachineHealthCheck
/// and a ClusterClass's or topology's `machineHealthCheck`), grouped in v1beta2.
fn health_check() -> Vec<Rule> {
    vec![
        r(
            "unhealthyConditions",
            "checks.unhealthyNodeConditions",
            Same,
        ),
        r(
            "unhealthyConditions[].timeout",
            "checks.unhealthyNodeConditions[].timeoutSeconds",
            Seconds,
        ),
        r(
            "unhealthyMachineConditions",
            "checks.unhealthyMachineConditions",
            Same,
        ),
        r(
            "unhealthyMachineConditions[].timeout",
            "checks.unhealthyMachineConditions[].timeoutSeconds",
            Seconds,
        ),
        r(
            "nodeStartupTimeout",
            "checks.nodeStartupTimeoutSeconds",
            Seconds,
        ),
        r(
            "maxUnhealthy",
            "remediation.triggerIf.unhealthyLessThanOrEqualTo",
            Same,
        ),
        r(
            "unhealthyRange",
            "remediation.triggerIf.unhealthyInRange",
            Same,
        ),
        r(
            "remediationTemplate",
            "remediation.templateRef",
            TemplateRef,
        ),
    ]
}

/// `KubeadmConfigSpec`.
fn kubeadm_config_spec() -> Vec<Rule> {
    let mut rules = vec![
        old_only("useExperimentalRetryJoin", BOOLEAN),
        old_only("clusterConfiguration.apiVersion", STRING),
        old_only("clusterConfiguration.kind", STRING),
        old_only("clusterConfiguration.clusterName", STRING),
        old_only("clusterConfiguration.kubernetesVersion", STRING),
        old_only("clusterConfiguration.networking", NETWORKING),
        old_only("initConfiguration.apiVersion", STRING),
        old_only("initConfiguration.kind", STRING),
        old_only("joinConfiguration.apiVersion", STRING),
        old_only("joinConfiguration.kind", STRING),
        r(
            "initConfiguration.bootstrapTokens[].ttl",
            "initConfiguration.bootstrapTokens[].ttlSeconds",
            Seconds,
        ),
        r(
            "clusterConfiguration.apiServer.timeoutForControlPlane",
            "initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds",
            Seconds,
        ),
        Rule {
            copy: true,
            ..r(
                "clusterConfiguration.apiServer.timeoutForControlPlane",
                "joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds",
                Seconds,
            )
        },
        r(
            "joinConfiguration.discovery.timeout",
            "joinConfiguration.timeouts.tlsBootstrapSeconds",
            Seconds,
        ),
        new_only("initConfiguration.timeouts"),
        new_only("joinConfiguration.timeouts"),
        r(
            "initConfiguration.nodeRegistration.kubeletExtraArgs",
            "initConfiguration.nodeRegistration.kubeletExtraArgs",
            Args,
        ),
        r(
            "joinConfiguration.nodeRegistration.kubeletExtraArgs",
            "joinConfiguration.nodeRegistration.kubeletExtraArgs",
            Args,
        ),
    ];
    for component in ["apiServer", "controllerManager", "scheduler", "etcd.local"] {
        let path = format!("clusterConfiguration.{component}.extraArgs");
        rules.push(r(&path, &path, Args));
    }
    rules
}

/// `KubeadmControlPlaneSpec` (and the template's, which has no infrastructure reference).
fn kubeadm_control_plane_spec() -> Vec<Rule> {
    let mut rules = under(
        kubeadm_config_spec(),
        "kubeadmConfigSpec",
        "kubeadmConfigSpec",
    );
    rules.extend([
        r(
            "machineTemplate.infrastructureRef",
            "machineTemplate.spec.infrastructureRef",
            ContractRef,
        ),
        r(
            "machineTemplate.readinessGates",
            "machineTemplate.spec.readinessGates",
            Same,
        ),
        r(
            "machineTemplate.taints",
            "machineTemplate.spec.taints",
            Same,
        ),
        r("machineNamingStrategy", "machineNaming", Same),
        r("remediationStrategy", "remediation", Same),
        r(
            "remediationStrategy.minHealthyPeriod",
            "remediation.minHealthyPeriodSeconds",
            Seconds,
        ),
        r(
            "remediationStrategy.retryPeriod",
            "remediation.retryPeriodSeconds",
            Seconds,
        ),
        r("rolloutAfter", "rollout.after", Same),
        r("rolloutBefore", "rollout.before", Same),
        r("rolloutStrategy", "rollout.strategy", Same),
    ]);
    rules.extend(under(
        deletion_timeouts(),
        "machineTemplate",
        "machineTemplate.spec",
    ));
    rules
}

/// `MachineDeploymentSpec`'s and `MachineSetSpec`'s template and naming.
fn machine_template_owner() -> Vec<Rule> {
    let mut rules = under(machine_spec(), "spec.template.spec", "spec.template.spec");
    rules.extend([
        r(
            "spec.minReadySeconds",
            "spec.template.spec.minReadySeconds",
            Same,
        ),
        r("spec.machineNamingStrategy", "spec.machineNaming", Same),
    ]);
    rules
}

/// The topology's and the class's ways of making a control plane's or a MachineDeployment's
/// health checks, rollout and deletion.
fn topology_machines(health_check_field: &str) -> Vec<Rule> {
    let mut rules = under(health_check(), "machineHealthCheck", health_check_field);
    rules.extend(deletion_timeouts());
    rules
}

fn machine_deployment_strategy() -> Vec<Rule> {
    vec![
        r(
            "strategy.rollingUpdate.deletePolicy",
            "deletion.order",
            Same,
        ),
        r(
            "strategy.remediation.maxInFlight",
            "healthCheck.remediation.maxInFlight",
            Same,
        ),
        r("strategy", "rollout.strategy", Same),
    ]
}

fn cluster() -> Vec<Rule> {
    let mut rules = vec![
        r("spec.controlPlaneRef", "spec.controlPlaneRef", ContractRef),
        r(
            "spec.infrastructureRef",
            "spec.infrastructureRef",
            ContractRef,
        ),
        r("spec.topology.class", "spec.topology.classRef.name", Same),
        r(
            "spec.topology.classNamespace",
            "spec.topology.classRef.namespace",
            Same,
        ),
        old_only("spec.topology.rolloutAfter", DATE_TIME),
        old_only("spec.topology.variables[].definitionFrom", STRING),
        old_only(
            "spec.topology.controlPlane.variables.overrides[].definitionFrom",
            STRING,
        ),
        r(
            "spec.topology.controlPlane.machineHealthCheck.enable",
            "spec.topology.controlPlane.healthCheck.enabled",
            Same,
        ),
        r(
            "status.controlPlaneReady",
            "status.initialization.controlPlaneInitialized",
            TrueOnly,
        ),
        r(
            "status.infrastructureReady",
            "status.initialization.infrastructureProvisioned",
            TrueOnly,
        ),
        r("status.failureDomains", "status.failureDomains", NamedMap),
        r("status.v1beta2.controlPlane", "status.controlPlane", Same),
        r("status.v1beta2.workers", "status.workers", Same),
    ];
    rules.extend(under(
        topology_machines("healthCheck"),
        "spec.topology.controlPlane",
        "spec.topology.controlPlane",
    ));
    let deployments = "spec.topology.workers.machineDeployments[]";
    let mut deployment = topology_machines("healthCheck");
    deployment.extend(machine_deployment_strategy());
    deployment.extend([
        r("machineHealthCheck.enable", "healthCheck.enabled", Same),
        old_only("variables.overrides[].definitionFrom", STRING),
    ]);
    rules.extend(under(deployment, deployments, deployments));
    let pools = "spec.topology.workers.machinePools[]";
    let mut pool = deletion_timeouts();
    pool.push(old_only("variables.overrides[].definitionFrom", STRING));
    rules.extend(under(pool, pools, pools));
    rules.extend(conditions());
    rules
}

fn cluster_class() -> Vec<Rule> {
    let mut rules = vec![
        r(
            "spec.infrastructure.ref",
            "spec.infrastructure.templateRef",
            TemplateRef,
        ),
        r(
            "spec.infrastructureNamingStrategy",
            "spec.infrastructure.naming",
            Same,
        ),
        r(
            "spec.controlPlane.ref",
            "spec.controlPlane.templateRef",
            TemplateRef,
        ),
        r(
            "spec.controlPlane.machineInfrastructure.ref",
            "spec.controlPlane.machineInfrastructure.templateRef",
            TemplateRef,
        ),
        r(
            "spec.controlPlane.namingStrategy",
            "spec.controlPlane.naming",
            Same,
        ),
        r(
            "spec.patches[].external.generateExtension",
            "spec.patches[].external.generatePatchesExtension",
            Same,
        ),
        r(
            "spec.patches[].external.validateExtension",
            "spec.patches[].external.validateTopologyExtension",
            Same,
        ),
        r(
            "spec.variables[].metadata",
            "spec.variables[].deprecatedV1Beta1Metadata",
            Same,
        ),
        r(
            "status.variables[].definitions[].metadata",
            "status.variables[].definitions[].deprecatedV1Beta1Metadata",
            Same,
        ),
    ];
    rules.extend(under(
        topology_machines("healthCheck"),
        "spec.controlPlane",
        "spec.controlPlane",
    ));
    for (list, strategy) in [("machineDeployments", true), ("machinePools", false)] {
        let path = format!("spec.workers.{list}[]");
        let mut class = vec![
            r("template.metadata", "metadata", Same),
            r(
                "template.bootstrap.ref",
                "bootstrap.templateRef",
                TemplateRef,
            ),
            r(
                "template.infrastructure.ref",
                "infrastructure.templateRef",
                TemplateRef,
            ),
            r("namingStrategy", "naming", Same),
        ];
        class.extend(deletion_timeouts());
        if strategy {
            class.extend(under(health_check(), "machineHealthCheck", "healthCheck"));
            class.extend(machine_deployment_strategy());
        }
        rules.extend(under(class, &path, &path));
    }
    rules.extend(conditions());
    rules
}

fn machine() -> Vec<Rule> {
    let mut rules = under(machine_spec(), "spec", "spec");
    rules.extend([
        new_only("spec.minReadySeconds"),
        r(
            "status.bootstrapReady",
            "status.initialization.bootstrapDataSecretCreated",
            TrueOnly,
        ),
        r(
            "status.infrastructureReady",
            "status.initialization.infrastructureProvisioned",
            TrueOnly,
        ),
        r("status.nodeRef", "status.nodeRef", NodeRef),
        new_only("status.failureDomain"),
    ]);
    rules.extend(conditions());
    rules
}

fn machine_set() -> Vec<Rule> {
    let mut rules = machine_template_owner();
    rules.push(r("spec.deletePolicy", "spec.deletion.order", Same));
    rules.extend(conditions());
    rules.extend(replica_counters());
    rules
}

fn machine_pool() -> Vec<Rule> {
    let mut rules = under(machine_spec(), "spec.template.spec", "spec.template.spec");
    rules.extend([
        r(
            "spec.minReadySeconds",
            "spec.template.spec.minReadySeconds",
            Same,
        ),
        r(
            "status.bootstrapReady",
            "status.initialization.bootstrapDataSecretCreated",
            TrueOnly,
        ),
        r(
            "status.infrastructureReady",
            "status.initialization.infrastructureProvisioned",
            TrueOnly,
        ),
    ]);
    rules.extend(conditions());
    // A pool's v1beta1 counters: no updated or fully labelled ones.
    rules.extend(replica_counters_of(&[
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ]));
    rules
}

fn machine_deployment() -> Vec<Rule> {
    let mut rules = machine_template_owner();
    rules.extend([
        r(
            "spec.strategy.rollingUpdate.deletePolicy",
            "spec.deletion.order",
            Same,
        ),
        r("spec.strategy.remediation", "spec.remediation", Same),
        r("spec.strategy", "spec.rollout.strategy", Same),
        r("spec.rolloutAfter", "spec.rollout.after", Same),
        old_only("spec.progressDeadlineSeconds", INTEGER),
        old_only("spec.revisionHistoryLimit", INTEGER),
    ]);
    rules.extend(conditions());
    rules.extend(replica_counters());
    rules
}

fn machine_health_check() -> Vec<Rule> {
    let mut rules = under(health_check(), "spec", "spec");
    rules.extend(conditions());
    rules
}

fn kubeadm_config() -> Vec<Rule> {
    let mut rules = under(kubeadm_config_spec(), "spec", "spec");
    rules.push(r(
        "status.ready",
        "status.initialization.dataSecretCreated",
        TrueOnly,
    ));
    rules.extend(conditions());
    rules
}

fn kubeadm_control_plane() -> Vec<Rule> {
    let mut rules = under(kubeadm_control_plane_spec(), "spec", "spec");
    rules.extend([
        r(
            "status.initialized",
            "status.initialization.controlPlaneInitialized",
            TrueOnly,
        ),
        // Rebuilt from the v1beta1 ready replicas going down, as upstream does.
        old_only("status.ready", BOOLEAN),
        r(
            "status.lastRemediation.timestamp",
            "status.lastRemediation.time",
            Same,
        ),
    ]);
    rules.extend(conditions());
    rules.extend(replica_counters());
    rules
}

fn docker_cluster_spec() -> Vec<Rule> {
    vec![r("failureDomains", "failureDomains", NamedMap)]
}

fn provisioned() -> Vec<Rule> {
    let mut rules = vec![r(
        "status.ready",
        "status.initialization.provisioned",
        TrueOnly,
    )];
    rules.extend(conditions());
    rules
}

/// A DockerMachine's or DevMachine's status.
fn infrastructure_machine() -> Vec<Rule> {
    let mut rules = provisioned();
    rules.push(new_only("status.failureDomain"));
    rules
}

/// A DockerMachinePool's status: `ready` in both versions, the conditions moved as every
/// kind's, and capictl's `initialization` (the v1beta2 contract's) in v1beta2 only. (Upstream
/// serves the Dev pools in v1beta2 alone.)
fn machine_pool_infrastructure() -> Vec<Rule> {
    let mut rules = conditions_only();
    rules.push(new_only("status.initialization"));
    rules
}

/// Every kind served in v1beta1, by group and kind, with its rules.
pub fn all() -> Vec<(&'static str, &'static str, Vec<Rule>)> {
    const CORE: &str = "cluster.x-k8s.io";
    const ADDONS: &str = "addons.cluster.x-k8s.io";
    const BOOTSTRAP: &str = "bootstrap.cluster.x-k8s.io";
    const CONTROL_PLANE: &str = "controlplane.cluster.x-k8s.io";
    const INFRASTRUCTURE: &str = "infrastructure.cluster.x-k8s.io";
    let infrastructure_cluster = |spec: &str| {
        let mut rules = under(docker_cluster_spec(), spec, spec);
        rules.push(r(
            "status.failureDomains",
            "status.failureDomains",
            NamedMap,
        ));
        rules.extend(provisioned());
        rules
    };
    let docker_cluster = infrastructure_cluster("spec");
    // The Dev kinds hold the Docker back end's fields under `spec.backend.docker`.
    let dev_cluster = infrastructure_cluster("spec.backend.docker");
    vec![
        (CORE, "Cluster", cluster()),
        (CORE, "ClusterClass", cluster_class()),
        (CORE, "Machine", machine()),
        (CORE, "MachineSet", machine_set()),
        (CORE, "MachineDeployment", machine_deployment()),
        (CORE, "MachinePool", machine_pool()),
        (CORE, "MachineHealthCheck", machine_health_check()),
        (CORE, "MachineDrainRule", vec![]),
        (ADDONS, "ClusterResourceSet", conditions_only()),
        (ADDONS, "ClusterResourceSetBinding", vec![]),
        (BOOTSTRAP, "KubeadmConfig", kubeadm_config()),
        (
            BOOTSTRAP,
            "KubeadmConfigTemplate",
            under(
                kubeadm_config_spec(),
                "spec.template.spec",
                "spec.template.spec",
            ),
        ),
        (
            CONTROL_PLANE,
            "KubeadmControlPlane",
            kubeadm_control_plane(),
        ),
        (
            CONTROL_PLANE,
            "KubeadmControlPlaneTemplate",
            under(
                kubeadm_control_plane_spec(),
                "spec.template.spec",
                "spec.template.spec",
            ),
        ),
        (INFRASTRUCTURE, "DockerCluster", docker_cluster),
        (
            INFRASTRUCTURE,
            "DockerClusterTemplate",
            under(
                docker_cluster_spec(),
                "spec.template.spec",
                "spec.template.spec",
            ),
        ),
        (INFRASTRUCTURE, "DockerMachine", infrastructure_machine()),
        (
            INFRASTRUCTURE,
            "DockerMachineTemplate",
            vec![new_only("status")],
        ),
        (INFRASTRUCTURE, "DevCluster", dev_cluster),
        (
            INFRASTRUCTURE,
            "DevClusterTemplate",
            under(
                docker_cluster_spec(),
                "spec.template.spec.backend.docker",
                "spec.template.spec.backend.docker",
            ),
        ),
        (INFRASTRUCTURE, "DevMachine", infrastructure_machine()),
        (
            INFRASTRUCTURE,
            "DevMachineTemplate",
            vec![new_only("status")],
        ),
        (
            INFRASTRUCTURE,
            "DockerMachinePool",
            machine_pool_infrastructure(),
        ),
        (INFRASTRUCTURE, "DockerMachinePoolTemplate", vec![]),
    ]
}

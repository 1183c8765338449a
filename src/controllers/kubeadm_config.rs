//! The kubeadm bootstrap provider's controller: turns the KubeadmConfig of a Machine (or of a
//! MachinePool, whose instances all join with it) into bootstrap
//! data (a cloud-config running `kubeadm init` or `kubeadm join`) in a Secret, with the cluster
//! certificates, the init lock (exactly one machine initializes the cluster), and bootstrap
//! tokens for the machines that join.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};
use rand::Rng;
use serde_json::json;

use crate::reconcile::{common, external};
use futures::future::BoxFuture;

use crate::api;
use crate::api::kubeadm_config::{
    Format, KubeadmConfigInitializationStatus, KubeadmConfigSpec, KubeadmConfigStatus,
};
use crate::api::{Cluster, KubeadmConfig, Machine, MachinePool};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::kubeadm::certs;
use crate::kubeadm::cloudinit::{self, WriteFile};
use crate::kubeadm::config;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Error, Result, StepContext};

/// Where each certificate Secret goes on a control-plane machine.
const CERTIFICATE_FILES: [(&str, &str, &str); 4] = [
    (
        "ca",
        "/etc/kubernetes/pki/ca.crt",
        "/etc/kubernetes/pki/ca.key",
    ),
    (
        "etcd",
        "/etc/kubernetes/pki/etcd/ca.crt",
        "/etc/kubernetes/pki/etcd/ca.key",
    ),
    (
        "proxy",
        "/etc/kubernetes/pki/front-proxy-ca.crt",
        "/etc/kubernetes/pki/front-proxy-ca.key",
    ),
    (
        "sa",
        "/etc/kubernetes/pki/sa.pub",
        "/etc/kubernetes/pki/sa.key",
    ),
];

/// How long a bootstrap token lives.
const TOKEN_TTL: Duration = Duration::from_secs(15 * 60);

/// Takes the cluster's init lock for a machine; whether it holds it.
async fn init_lock(client: &Client, cluster: &Cluster, machine: &str) -> Result<bool> {
    let maps: Api<ConfigMap> =
        Api::namespaced(client.clone(), &cluster.namespace().unwrap_or_default());
    let name = format!("{}-lock", cluster.name_any());
    let lock = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(
                api::CLUSTER_NAME_LABEL.to_string(),
                cluster.name_any(),
            )])),
            owner_references: Some(vec![common::owner_reference(cluster, false)]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "lock-information".to_string(),
            format!("{{\"machineName\":\"{machine}\"}}"),
        )])),
        ..Default::default()
    };
    match maps.create(&PostParams::default(), &lock).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let held = maps.get(&name).await?;
            Ok(held
                .data
                .and_then(|d| d.get("lock-information").cloned())
                .is_some_and(|i| i.contains(&format!("\"{machine}\""))))
        }
        Err(e) => Err(e.into()),
    }
}

/// A new kubeadm bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}`.
fn new_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let mut pick = |n: usize| -> String {
        (0..n)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
            .collect()
    };
    format!("{}.{}", pick(6), pick(16))
}

/// The token a joining machine uses, as upstream keeps it: in the KubeadmConfig's
/// `spec.joinConfiguration.discovery.bootstrapToken.token`.
fn spec_token(spec: &KubeadmConfigSpec) -> Option<&str> {
    spec.join_configuration
        .as_ref()?
        .discovery
        .as_ref()?
        .bootstrap_token
        .as_ref()?
        .token
        .as_deref()
}

/// Creates a bootstrap token in the workload cluster, or pushes its expiration another
/// [`TOKEN_TTL`] out, so that a machine still booting can join.
async fn ensure_bootstrap_token(workload: &Client, token: &str) -> Result<()> {
    let (id, secret) = token.split_once('.').ok_or_else(|| {
        Error::Invalid("a bootstrap token has the form abcdef.0123456789abcdef".into())
    })?;
    let expiration =
        Timestamp::from_second(Timestamp::now().as_second() + TOKEN_TTL.as_secs() as i64)
            .expect("a valid time")
            .to_string();
    let api = Api::<Secret>::namespaced(workload.clone(), "kube-system");
    let name = format!("bootstrap-token-{id}");
    let data: BTreeMap<String, ByteString> = [
        ("token-id", id),
        ("token-secret", secret),
        ("expiration", expiration.as_str()),
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
        (
            "auth-extra-groups",
            "system:bootstrappers:kubeadm:default-node-token",
        ),
        ("description", "token generated by capictl"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let object = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".into()),
        data: Some(data),
        ..Default::default()
    };
    if !common::create_if_absent(&api, &object).await? {
        let expiration = ByteString(expiration.into_bytes());
        common::patch_merge(&api, &name, json!({"data": {"expiration": expiration}})).await?;
    }
    Ok(())
}

/// What a file whose `contentFormat` is `Template` may use, as upstream passes it:
/// `.controlPlane.version` when the control plane has a version (absent otherwise, so that
/// `{{ if .controlPlane }}` can tell).
fn template_data(control_plane_version: Option<&str>) -> serde_json::Value {
    match control_plane_version {
        Some(version) => json!({"controlPlane": {"version": version}}),
        None => json!({}),
    }
}

/// A file's content as `contentFormat` says: verbatim, or rendered as a Go text/template
/// (at most 1 MiB, upstream's bound).
fn file_content(
    file: &crate::api::kubeadm_config::File,
    content: String,
    data: &serde_json::Value,
) -> Result<String> {
    use crate::api::kubeadm_config::FileContentFormat;
    if file.content_format != Some(FileContentFormat::Template) {
        return Ok(content);
    }
    let rendered = crate::gotemplate::render(&content, data).map_err(|e| {
        Error::Invalid(format!(
            "Failed to prepare spec.files: failed to execute template for file {:?}: {e}",
            file.path
        ))
    })?;
    if rendered.len() > 1 << 20 {
        return Err(Error::Invalid(format!(
            "Failed to prepare spec.files: template for file {:?} renders to more than 1048576 bytes",
            file.path
        )));
    }
    Ok(rendered)
}

/// The spec's own files, with contents from Secrets resolved and templates rendered.
async fn spec_files(
    client: &Client,
    namespace: &str,
    spec: &KubeadmConfigSpec,
    control_plane_version: Option<&str>,
) -> Result<Vec<WriteFile>> {
    let data = template_data(control_plane_version);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut out = Vec::new();
    for f in spec.files.iter().flatten() {
        let content = match (&f.content, &f.content_from) {
            (_, Some(from)) => {
                let secret = secrets.get_opt(&from.secret.name).await?.ok_or_else(|| {
                    Error::Invalid(format!(
                        "Failed to prepare spec.files: Secret {} for {} does not exist",
                        from.secret.name, f.path
                    ))
                })?;
                let bytes = secret
                    .data
                    .and_then(|d| d.get(&from.secret.key).cloned())
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "Failed to prepare spec.files: Secret {} has no key {}",
                            from.secret.name, from.secret.key
                        ))
                    })?;
                String::from_utf8_lossy(&bytes.0).into_owned()
            }
            (Some(c), None) => c.clone(),
            (None, None) => String::new(),
        };
        let content = file_content(f, content, &data)?;
        out.push(WriteFile {
            path: f.path.clone(),
            owner: f.owner.clone().unwrap_or_else(|| "root:root".into()),
            permissions: f.permissions.clone().unwrap_or_else(|| "0644".into()),
            content,
            encoding: f
                .encoding
                .and_then(|e| serde_json::to_value(e).ok())
                .and_then(|v| v.as_str().map(String::from)),
            append: f.append.unwrap_or(false),
        });
    }
    Ok(out)
}

fn data_secret_pending(message: &str) -> NewCondition {
    NewCondition::new(
        api::kubeadm_config::conditions::DATA_SECRET_AVAILABLE,
        Status::False,
        conditions::reasons::NOT_AVAILABLE,
    )
    .message(message)
}

/// What a KubeadmConfig makes bootstrap data for: one Machine, or every instance of a
/// MachinePool (which join as workers, now and whenever the pool grows).
enum ConfigOwner {
    Machine(Box<Machine>),
    Pool(Box<MachinePool>),
}

impl ConfigOwner {
    fn name(&self) -> String {
        match self {
            ConfigOwner::Machine(m) => m.name_any(),
            ConfigOwner::Pool(p) => p.name_any(),
        }
    }

    fn control_plane(&self) -> bool {
        matches!(self, ConfigOwner::Machine(m) if m.labels().contains_key(api::CONTROL_PLANE_LABEL))
    }

    fn version(&self) -> Option<&str> {
        match self {
            ConfigOwner::Machine(m) => m.spec.version.as_deref(),
            ConfigOwner::Pool(p) => p.spec.template.spec.version.as_deref(),
        }
    }

    /// The data Secret the owner already names.
    fn data_secret_name(&self) -> Option<&str> {
        match self {
            ConfigOwner::Machine(m) => m.spec.bootstrap.data_secret_name.as_deref(),
            ConfigOwner::Pool(p) => p.spec.template.spec.bootstrap.data_secret_name.as_deref(),
        }
    }

    /// What its join token needs now.
    fn token_care(&self) -> TokenCare {
        match self {
            ConfigOwner::Machine(m) if super::machines::node_name(m).is_none() => {
                TokenCare::Refresh
            }
            ConfigOwner::Machine(_) => TokenCare::None,
            ConfigOwner::Pool(p) => {
                let joined = p
                    .status
                    .as_ref()
                    .and_then(|s| s.node_refs.as_ref())
                    .is_some_and(|n| !n.is_empty());
                if joined {
                    TokenCare::Rotate
                } else {
                    TokenCare::Refresh
                }
            }
        }
    }
}

/// What a config's join token needs, as upstream keeps it.
#[derive(Debug, PartialEq, Eq)]
enum TokenCare {
    /// Nothing: its Machine joined.
    None,
    /// Kept valid (its expiry pushed out) until the first Node shows up.
    Refresh,
    /// A pool whose instances joined: replaced, with new bootstrap data, once less than half
    /// its life is left, so that instances joining later get a fresh token and an old one
    /// expires.
    Rotate,
}

/// What one reconcile knows of a KubeadmConfig's world, gathered once.
struct Scope {
    api: Api<KubeadmConfig>,
    owner: ConfigOwner,
    cluster: Cluster,
}

impl Scope {
    /// None while the owning Machine or MachinePool or its Cluster cannot be found yet.
    async fn gather(kc: &KubeadmConfig, ctx: &Context) -> Result<Option<Scope>> {
        let ns = kc.namespace().unwrap_or_default();
        let api = Api::namespaced(ctx.client.clone(), &ns);
        if let Some((machine, cluster)) =
            common::owning_machine_and_cluster(&ctx.client, kc).await?
        {
            return Ok(Some(Scope {
                api,
                owner: ConfigOwner::Machine(Box::new(machine)),
                cluster,
            }));
        }
        let Some((pool, cluster)) =
            common::owner_and_cluster(&ctx.client, kc, |p: &MachinePool| {
                p.spec.cluster_name.as_str()
            })
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Scope {
            api,
            owner: ConfigOwner::Pool(Box::new(pool)),
            cluster,
        }))
    }

    fn control_plane_initialized(&self) -> bool {
        self.cluster
            .status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.control_plane_initialized)
            == Some(true)
    }
}

/// Where a KubeadmConfig's bootstrap data stands.
#[derive(Debug)]
enum Progress {
    /// The data Secret was written by this reconcile.
    Created,
    /// It was written by an earlier one.
    CreatedBefore,
    /// Not yet: what it waits for.
    Waiting(NewCondition),
}

/// The KubeadmConfig controller: KubeadmConfigs.
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<KubeadmConfig>("kubeadmconfig");
    w.run("kubeadmconfig", controller, reconcile)
}

pub async fn reconcile(kc: Arc<KubeadmConfig>, ctx: Arc<Context>) -> Result<Action> {
    if common::deleting(kc.as_ref()) {
        return Ok(Action::await_change());
    }
    let Some(scope) = Scope::gather(&kc, &ctx)
        .await
        .step("reading the owning Machine or MachinePool and its Cluster")?
    else {
        return Ok(Action::requeue(Duration::from_secs(2)));
    };

    // Guards.
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        Some(&scope.cluster),
        "KubeadmConfig",
        kc.annotations(),
    );
    if scope.control_plane_initialized() {
        // The cluster is up: the init lock has served its purpose.
        let _ =
            Api::<ConfigMap>::namespaced(ctx.client.clone(), &kc.namespace().unwrap_or_default())
                .delete(
                    &format!("{}-lock", scope.cluster.name_any()),
                    &DeleteParams::default(),
                )
                .await;
    }

    // Phases.
    let progress = if is_paused {
        None
    } else {
        Some(
            bootstrap_data(&ctx, &kc, &scope)
                .await
                .step("writing the bootstrap data")?,
        )
    };

    // Status, computed once from where the bootstrap data stands.
    let status = compute_status(&kc, paused, progress.as_ref());
    common::write_status(&scope.api, &kc.name_any(), kc.status.as_ref(), &status).await?;
    match progress {
        None | Some(Progress::Created) => Ok(Action::await_change()),
        Some(Progress::Waiting(_)) => Ok(Action::requeue(Duration::from_secs(2))),
        Some(Progress::CreatedBefore) => keep_join_token_valid(&ctx, &kc, &scope)
            .await
            .step("refreshing the bootstrap token"),
    }
}

/// Until its Node shows up, a joining machine's bootstrap token must stay valid; a pool's is
/// refreshed until its first instances joined, then rotated.
async fn keep_join_token_valid(ctx: &Context, kc: &KubeadmConfig, scope: &Scope) -> Result<Action> {
    let ns = kc.namespace().unwrap_or_default();
    let Some(token) = spec_token(&kc.spec) else {
        return Ok(Action::await_change());
    };
    let care = scope.owner.token_care();
    if care == TokenCare::None {
        return Ok(Action::await_change());
    }
    let Some(workload) = ctx.workloads.client(&ns, &scope.cluster.name_any()).await? else {
        return Ok(Action::requeue(TOKEN_TTL / 3));
    };
    if care == TokenCare::Refresh {
        ensure_bootstrap_token(&workload, token).await?;
        return Ok(Action::requeue(TOKEN_TTL / 3));
    }
    let left = token_life_left(&workload, token).await?;
    if left.is_some_and(|left| left > TOKEN_TTL / 2) {
        return Ok(Action::requeue(TOKEN_TTL / 3));
    }
    // A new token first (kept in the spec, so a crash reuses it), then the data with it.
    let rotated = common::patch_merge(
        &scope.api,
        &kc.name_any(),
        json!({"spec": {"joinConfiguration": {"discovery": {"bootstrapToken": {"token": new_token()}}}}}),
    )
    .await?;
    tracing::info!(config = %kc.name_any(), "rotating a MachinePool's bootstrap token");
    write_bootstrap_data(ctx, &rotated, scope, Rewrite::Replace).await?;
    Ok(Action::requeue(TOKEN_TTL / 3))
}

/// How long a bootstrap token in the workload cluster has left; None when it is gone.
async fn token_life_left(workload: &Client, token: &str) -> Result<Option<Duration>> {
    let id = token.split_once('.').map_or(token, |(id, _)| id);
    let secret = Api::<Secret>::namespaced(workload.clone(), "kube-system")
        .get_opt(&format!("bootstrap-token-{id}"))
        .await?;
    let expiration = secret
        .and_then(|s| s.data)
        .and_then(|d| d.get("expiration").cloned())
        .and_then(|e| String::from_utf8(e.0).ok())
        .and_then(|e| e.parse::<Timestamp>().ok());
    Ok(expiration.map(|at| {
        let seconds = at.as_second() - Timestamp::now().as_second();
        Duration::from_secs(seconds.max(0) as u64)
    }))
}

/// The KubeadmConfig's status: the data Secret once it exists, or what it waits for.
fn compute_status(
    kc: &KubeadmConfig,
    paused: NewCondition,
    progress: Option<&Progress>,
) -> KubeadmConfigStatus {
    let mut status = kc.status.clone().unwrap_or_default();
    let generation = kc.meta().generation;
    let mut conds = vec![paused];
    match progress {
        // Paused: only the Paused condition is news.
        None => {}
        Some(Progress::Waiting(waiting_for)) => conds.push(waiting_for.clone()),
        Some(Progress::Created | Progress::CreatedBefore) => {
            status.data_secret_name = Some(kc.name_any());
            status.initialization = Some(KubeadmConfigInitializationStatus {
                data_secret_created: Some(true),
            });
            status.observed_generation = generation;
            conds.extend([
                NewCondition::new(
                    api::kubeadm_config::conditions::DATA_SECRET_AVAILABLE,
                    Status::True,
                    conditions::reasons::AVAILABLE,
                ),
                NewCondition::new(
                    api::kubeadm_config::conditions::CERTIFICATES_AVAILABLE,
                    Status::True,
                    conditions::reasons::AVAILABLE,
                ),
                NewCondition::new(
                    conditions::types::READY,
                    Status::True,
                    conditions::reasons::READY,
                ),
            ]);
        }
    }
    common::set_conditions(&mut status.conditions, generation, conds);
    status
}

/// Renders the cloud-config for `kubeadm init` (the first control plane, holding the init
/// lock) or `kubeadm join` into the data Secret, once the cluster is far enough along.
async fn bootstrap_data(ctx: &Context, kc: &KubeadmConfig, scope: &Scope) -> Result<Progress> {
    // Its Machine naming the data Secret also means it was written: the status is not carried
    // when `capictl move` (or a restore) recreates the config, and the data must not change.
    let written = kc
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.data_secret_created)
        == Some(true)
        || scope.owner.data_secret_name().is_some();
    if written {
        return Ok(Progress::CreatedBefore);
    }
    write_bootstrap_data(ctx, kc, scope, Rewrite::Never).await
}

/// Whether bootstrap data already written is written again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rewrite {
    /// Never: a Machine's data must not change once written.
    Never,
    /// Replaced: a pool's, with its rotated token.
    Replace,
}

/// Renders the bootstrap data into the data Secret, or says what it waits for.
async fn write_bootstrap_data(
    ctx: &Context,
    kc: &KubeadmConfig,
    scope: &Scope,
    rewrite: Rewrite,
) -> Result<Progress> {
    let (config_owner, cluster) = (&scope.owner, &scope.cluster);
    let ns = kc.namespace().unwrap_or_default();
    let init_done = scope.control_plane_initialized();
    let infra = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.infrastructure_provisioned)
        == Some(true);
    let endpoint = cluster
        .spec
        .control_plane_endpoint
        .clone()
        .filter(|e| e.is_valid());
    let control_plane = config_owner.control_plane();
    let version = config_owner.version().unwrap_or_default().to_string();
    let waiting = |message: &str| Ok(Progress::Waiting(data_secret_pending(message)));
    if kc.spec.format == Some(Format::Ignition) {
        return Ok(Progress::Waiting(
            NewCondition::new(api::kubeadm_config::conditions::DATA_SECRET_AVAILABLE, Status::False, api::kubeadm_config::reasons::NOT_SUPPORTED).message(
                "spec.format ignition is not supported by capictl yet; use cloud-config (the default)",
            ),
        ));
    }
    if !infra {
        return waiting("Waiting for Cluster status.infrastructureReady to be true");
    }
    let Some(endpoint) = endpoint else {
        return waiting("Waiting for Cluster spec.controlPlaneEndpoint to be set");
    };
    if !control_plane && !init_done {
        return waiting("Waiting for Cluster control plane to be initialized");
    }
    let endpoint = endpoint.to_string();
    let init = control_plane && !init_done;
    // Certificates: made for the first control-plane machine when nobody made them yet.
    let generate = init && cluster.spec.control_plane_ref.is_none();
    let owner = generate.then(|| common::owner_reference(cluster, true));
    let policy = crate::kubeadm::certs::certificate_policy(kc.spec.cluster_configuration.as_ref());
    let Some(certificates) =
        super::secrets::cluster_certificates(&ctx.client, cluster, owner, policy).await?
    else {
        return Ok(Progress::Waiting(
            NewCondition::new(
                api::kubeadm_config::conditions::CERTIFICATES_AVAILABLE,
                Status::False,
                conditions::reasons::NOT_AVAILABLE,
            )
            .message("Waiting for the cluster certificates"),
        ));
    };
    if init && !init_lock(&ctx.client, cluster, &config_owner.name()).await? {
        return waiting("Waiting for the first control plane machine to initialize the cluster");
    }
    let spec = &kc.spec;
    let mut files = Vec::new();
    if control_plane {
        for (purpose, cert_path, key_path) in CERTIFICATE_FILES {
            let pair = certs::pem_pair(&certificates[purpose])?;
            files.push(WriteFile::new(cert_path, "0640", &pair.cert));
            files.push(WriteFile::new(key_path, "0600", &pair.key));
        }
    }
    let control_plane_version = match &cluster.spec.control_plane_ref {
        Some(reference) => ctx.external.get(&ns, reference).await?.and_then(|cp| {
            external::field(&cp, &["spec", "version"])?
                .as_str()
                .map(String::from)
        }),
        None => None,
    };
    files.extend(spec_files(&ctx.client, &ns, spec, control_plane_version.as_deref()).await?);
    let (action, kubeadm) = if init {
        (
            cloudinit::Action::Init,
            config::init_config(spec, &version, &cluster.name_any(), &endpoint),
        )
    } else {
        let Some(workload) = ctx.workloads.client(&ns, &cluster.name_any()).await? else {
            return waiting("Waiting for the Cluster's kubeconfig to create a bootstrap token");
        };
        let token = match spec_token(spec) {
            Some(t) => t.to_string(),
            None => {
                // Kept in the spec first, so a crash before the Secret is written reuses it.
                let token = new_token();
                common::patch_merge(
                    &scope.api,
                    &kc.name_any(),
                    json!({"spec": {"joinConfiguration": {"discovery": {"bootstrapToken": {"token": token}}}}}),
                )
                .await?;
                token
            }
        };
        ensure_bootstrap_token(&workload, &token).await?;
        let hash = certs::ca_cert_hash(&certs::pem_pair(&certificates["ca"])?.cert)?;
        (
            cloudinit::Action::Join,
            config::join_config(spec, &version, &endpoint, &token, &hash, control_plane),
        )
    };
    let data = cloudinit::cloud_config(spec, action, &kubeadm, files);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(kc.name_any()),
            namespace: Some(ns.clone()),
            labels: Some(BTreeMap::from([(
                api::CLUSTER_NAME_LABEL.to_string(),
                cluster.name_any(),
            )])),
            owner_references: Some(vec![common::owner_reference(kc, true)]),
            ..Default::default()
        },
        type_: Some(certs::SECRET_TYPE.into()),
        data: Some(BTreeMap::from([
            ("value".to_string(), ByteString(data.into_bytes())),
            ("format".to_string(), ByteString(b"cloud-config".to_vec())),
        ])),
        ..Default::default()
    };
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &ns);
    if !common::create_if_absent(&secrets, &secret).await? && rewrite == Rewrite::Replace {
        common::patch_merge(&secrets, &kc.name_any(), json!({"data": secret.data})).await?;
    }
    Ok(Progress::Created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_files_render_with_the_control_plane_version_and_raw_ones_stay() {
        let file = |format: Option<&str>| -> crate::api::kubeadm_config::File {
            serde_json::from_value(json!({"path": "/etc/v", "contentFormat": format})).unwrap()
        };
        let text = "{{ if .controlPlane }}cp {{ .controlPlane.version }}{{ else }}none{{ end }}";
        let with = template_data(Some("v1.30.4"));
        let without = template_data(None);
        for (format, data, want) in [
            (Some("Template"), &with, "cp v1.30.4"),
            (Some("Template"), &without, "none"),
            (Some("Raw"), &with, text),
            (None, &with, text),
        ] {
            let got = file_content(&file(format), text.into(), data).unwrap();
            assert_eq!(got, want, "{format:?}");
        }
        let broken = file_content(&file(Some("Template")), "{{ .controlPlane".into(), &with);
        let message = broken.unwrap_err().to_string();
        assert!(message.contains("\"/etc/v\""), "{message}");
    }

    fn config(status: serde_json::Value) -> KubeadmConfig {
        serde_json::from_value(json!({
            "metadata": {"name": "m-1", "namespace": "ns", "generation": 2},
            "spec": {},
            "status": status,
        }))
        .unwrap()
    }

    fn condition<'a>(status: &'a KubeadmConfigStatus, type_: &str) -> Option<&'a str> {
        status
            .conditions
            .as_deref()
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .map(|c| c.status.as_str())
    }

    #[test]
    fn a_token_is_refreshed_until_a_node_joins_and_a_pools_is_rotated_after() {
        let machine = |node: bool| -> ConfigOwner {
            let status = if node {
                json!({"nodeRef": {"name": "n"}})
            } else {
                json!({})
            };
            ConfigOwner::Machine(Box::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "m"},
                    "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "m"}},
                    "status": status,
                }))
                .unwrap(),
            ))
        };
        let pool = |nodes: serde_json::Value| -> ConfigOwner {
            ConfigOwner::Pool(Box::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "p"},
                    "spec": {"clusterName": "c", "template": {"spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "p"}}}},
                    "status": {"nodeRefs": nodes},
                }))
                .unwrap(),
            ))
        };
        for (case, owner, want) in [
            ("a Machine booting", machine(false), TokenCare::Refresh),
            ("a Machine joined", machine(true), TokenCare::None),
            ("a pool not joined yet", pool(json!([])), TokenCare::Refresh),
            (
                "a pool with Nodes",
                pool(json!([{"kind": "Node", "name": "n"}])),
                TokenCare::Rotate,
            ),
        ] {
            assert_eq!(owner.token_care(), want, "{case}");
        }
    }

    #[test]
    fn status_table() {
        let paused = |is: bool| {
            let status = if is { Status::True } else { Status::False };
            NewCondition::new(conditions::types::PAUSED, status, "R")
        };
        let waiting = || {
            Progress::Waiting(data_secret_pending(
                "Waiting for Cluster spec.controlPlaneEndpoint to be set",
            ))
        };
        /// A case's name, whether paused, the progress, whether the data Secret is recorded,
        /// and the DataSecretAvailable and Ready statuses expected.
        type Case<'a> = (
            &'a str,
            bool,
            Option<Progress>,
            bool,
            Option<&'a str>,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "waiting says for what",
                false,
                Some(waiting()),
                false,
                Some("False"),
                None,
            ),
            (
                "created: the Secret is recorded",
                false,
                Some(Progress::Created),
                true,
                Some("True"),
                Some("True"),
            ),
            (
                "created before: still recorded",
                false,
                Some(Progress::CreatedBefore),
                true,
                Some("True"),
                Some("True"),
            ),
            ("paused: only Paused changes", true, None, false, None, None),
        ];
        for (case, is_paused, progress, recorded, data_secret, ready) in cases {
            let status = compute_status(&config(json!({})), paused(is_paused), progress.as_ref());
            assert_eq!(status.data_secret_name.is_some(), recorded, "{case}");
            assert_eq!(
                status
                    .initialization
                    .as_ref()
                    .and_then(|i| i.data_secret_created),
                recorded.then_some(true),
                "{case}"
            );
            assert_eq!(
                condition(&status, "Paused"),
                Some(if is_paused { "True" } else { "False" }),
                "{case}"
            );
            assert_eq!(
                condition(&status, "DataSecretAvailable"),
                data_secret,
                "{case}"
            );
            assert_eq!(condition(&status, "Ready"), ready, "{case}");
        }
        let status = compute_status(&config(json!({})), paused(false), Some(&waiting()));
        let c = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "DataSecretAvailable")
            .unwrap();
        assert_eq!(
            c.message,
            "Waiting for Cluster spec.controlPlaneEndpoint to be set"
        );
    }
}

//! `capictl init`: installs Cluster API providers into a management cluster, as clusterctl
//! does, without cert-manager; starts the embedded management cluster when asked to and none
//! is reachable. On the embedded cluster the providers' controllers run in-process, so only
//! their CRDs, namespaces and inventory go in.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::Provider;
use crate::init::{self, PROVIDERS, ProviderInfo};
use crate::pki::Pki;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<InitCommand>,
    #[command(flatten)]
    providers: ProviderFlags,
    /// One namespace for every provider installed by this run [default: each provider's own]
    #[arg(short = 'n', long, value_name = "NS")]
    target_namespace: Option<String>,
    /// The image the providers' controller Deployments run.
    #[arg(long, value_name = "IMAGE", default_value_t = crate::build_info::controller_image())]
    image: String,
    /// Start the embedded management cluster if none is reachable, without asking.
    #[arg(short, long)]
    yes: bool,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Whether the first run ends by saying how to create a cluster (quickstart does that).
    #[arg(skip = true)]
    next_steps: bool,
}

/// Which providers to install, as init's flags name them.
#[derive(Debug, Default, clap::Args)]
struct ProviderFlags {
    /// The core provider [default: cluster-api on the first run]
    #[arg(long, value_name = "NAME[:VERSION]")]
    core: Option<String>,
    /// Bootstrap providers [default: kubeadm on the first run]
    #[arg(short, long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    bootstrap: Vec<String>,
    /// Control plane providers [default: kubeadm on the first run]
    #[arg(short, long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    control_plane: Vec<String>,
    /// Infrastructure providers: docker, in-memory.
    #[arg(short, long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    infrastructure: Vec<String>,
}

impl ProviderFlags {
    /// The providers named, in install order; `defaults` adds the core and kubeadm providers
    /// where none of their type is named (a first run).
    fn requested(&self, defaults: bool) -> anyhow::Result<Vec<ProviderInfo>> {
        let mut requested = Vec::new();
        if let Some(core) = &self.core {
            requested.push(parse("CoreProvider", core)?);
        }
        for (type_, values) in [
            ("BootstrapProvider", &self.bootstrap),
            ("ControlPlaneProvider", &self.control_plane),
            ("InfrastructureProvider", &self.infrastructure),
        ] {
            for v in values.iter().filter(|v| v.as_str() != "-") {
                requested.push(parse(type_, v)?);
            }
        }
        if defaults {
            for (type_, given, name) in [
                ("CoreProvider", self.core.is_some(), "cluster-api"),
                ("BootstrapProvider", !self.bootstrap.is_empty(), "kubeadm"),
                (
                    "ControlPlaneProvider",
                    !self.control_plane.is_empty(),
                    "kubeadm",
                ),
            ] {
                if !given {
                    requested.push(init::find(type_, name).expect("built in"));
                }
            }
        }
        let order = |p: &ProviderInfo| PROVIDERS.iter().position(|q| q == p);
        requested.sort_by_key(order);
        requested.dedup();
        Ok(requested)
    }
}

#[derive(Debug, clap::Subcommand)]
enum InitCommand {
    /// The images the providers' components run, one per line: what a registry must hold for
    /// a management cluster that cannot reach them otherwise.
    ListImages(ListImagesArgs),
}

#[derive(Debug, clap::Args)]
struct ListImagesArgs {
    #[command(flatten)]
    providers: ProviderFlags,
    /// The image the providers' controller Deployments run.
    #[arg(long, value_name = "IMAGE", default_value_t = crate::build_info::controller_image())]
    image: String,
}

/// The images of the providers' components, sorted and each once (the core and kubeadm
/// providers are always among them, as on a first run).
fn list_images(args: &ListImagesArgs) -> anyhow::Result<Vec<String>> {
    let mut images = Vec::new();
    for p in args.providers.requested(true)? {
        for object in init::components(&p, &args.image, p.namespace, true) {
            for container in object["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                images.extend(container["image"].as_str().map(String::from));
            }
        }
    }
    images.sort();
    images.dedup();
    Ok(images)
}

impl Args {
    /// What `capictl quickstart` installs: the default providers and `infrastructure`, into
    /// the management cluster `cluster` names or else the embedded one, started without
    /// asking; it waits until they are ready.
    pub(super) fn for_quickstart(infrastructure: &str, cluster: ClusterArgs) -> Args {
        Args {
            command: None,
            providers: ProviderFlags {
                infrastructure: vec![infrastructure.to_string()],
                ..Default::default()
            },
            target_namespace: None,
            image: crate::build_info::controller_image(),
            yes: true,
            wait: WaitArgs {
                wait_providers: true,
                wait_provider_timeout: 300,
            },
            cluster,
            next_steps: false,
        }
    }
}

/// `--wait-providers` and its time-out, as init and `upgrade apply` take them.
#[derive(Debug, clap::Args)]
pub(super) struct WaitArgs {
    /// Wait until the providers this run installs or upgrades are ready: their CRDs served and, on a
    /// real cluster, their controller Deployments available.
    #[arg(long)]
    wait_providers: bool,
    /// How long --wait-providers waits for each provider.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    wait_provider_timeout: u64,
}

impl WaitArgs {
    /// Waits for `providers` (provider, namespace) when --wait-providers asks to.
    pub(super) async fn wait(
        &self,
        client: &Client,
        providers: &[(&ProviderInfo, &str)],
        embedded: bool,
    ) -> anyhow::Result<()> {
        if !self.wait_providers {
            return Ok(());
        }
        let timeout = Duration::from_secs(self.wait_provider_timeout);
        wait_for_providers(client, providers, embedded, timeout).await
    }
}

/// Whether the management cluster is capictl's embedded one, whose controllers run in-process:
/// its `/version` carries `+capictl` (the API server of a capictl node reports the Kubernetes
/// version it stands for, and gets Deployments like any other cluster).
pub(super) async fn is_embedded(client: &Client) -> bool {
    client
        .apiserver_version()
        .await
        .is_ok_and(|v| v.git_version.contains("+capictl"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(InitCommand::ListImages(list)) = &args.command {
        let mut out = std::io::stdout().lock();
        for image in list_images(list)? {
            std::io::Write::write_all(&mut out, format!("{image}\n").as_bytes())?;
        }
        return Ok(());
    }
    tokio::runtime::Runtime::new()?.block_on(init(args))
}

const MANAGER: &str = "capictl";

/// Server-side applies an object, whatever its kind.
pub(super) async fn apply(client: &Client, object: &Value) -> anyhow::Result<()> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api = super::connect::api_for(client, object);
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| anyhow::anyhow!("installing {kind} {name}: {e}"))?;
    Ok(())
}

/// `name[:version]`; the version, when given, must be this capictl's.
fn parse(type_: &str, value: &str) -> anyhow::Result<ProviderInfo> {
    let (name, version) = match value.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (value, None),
    };
    let provider = init::find(type_, name).map_err(UsageError)?;
    let ours = format!("v{}", crate::build_info::VERSION);
    if let Some(v) = version.filter(|v| *v != ours) {
        return Err(UsageError(format!(
            "{name}:{v}: this capictl carries {name} {ours} only; drop the version or use the capictl of {v}"
        ))
        .into());
    }
    Ok(provider)
}

/// Asks, on a terminal, whether to start the embedded management cluster; None where there is
/// no one to ask (scripts say --yes).
fn ask_to_start() -> anyhow::Result<Option<bool>> {
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(None);
    }
    Ok(Some(
        dialoguer::Confirm::new()
            .with_prompt("No management cluster is reachable. Start the embedded one now?")
            .default(true)
            .interact()?,
    ))
}

/// Why a configured management cluster did not answer.
enum Unanswered {
    /// It answered, refusing the credentials (or the TLS handshake failed): starting another
    /// cluster instead would hide that.
    Refused(String),
    /// Nothing answered (not running, a network problem).
    Unreachable(String),
}

fn classify(error: kube::Error) -> Unanswered {
    match &error {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => {
            Unanswered::Refused(format!("{} {}: {}", s.code, s.reason, s.message))
        }
        // The credentials could not even be made (an exec plugin failed, a token file is gone).
        kube::Error::Auth(e) => Unanswered::Refused(format!("the credentials: {e}")),
        _ => {
            let error = anyhow::Error::from(error);
            let text = format!("{error:#}");
            if ["certificate", "tls", "handshake"]
                .iter()
                .any(|w| text.to_lowercase().contains(w))
            {
                Unanswered::Refused(text)
            } else {
                // The root cause (connection refused, no route); the layers above it are the
                // client's own wrapping.
                Unanswered::Unreachable(
                    error
                        .chain()
                        .last()
                        .map(ToString::to_string)
                        .unwrap_or(text),
                )
            }
        }
    }
}

/// The current context of the kubeconfig `management up` writes to, if any.
fn current_context() -> Option<String> {
    kube::config::Kubeconfig::read_from(crate::management::kubeconfig_path(None))
        .ok()?
        .current_context
}

/// The management cluster, started when none is configured or the configured one is not
/// reachable — never when it refused the credentials — and the user said yes.
async fn connect(args: &Args) -> anyhow::Result<Client> {
    let configured = match args.cluster.client().await {
        // /version answers anyone; discovery needs the credentials to be good.
        Ok((client, _)) => match client.list_api_groups().await {
            Ok(_) => return Ok(client),
            Err(e) => Some(classify(e)),
        },
        // A kubeconfig that chooses a cluster but cannot be used is not one to replace.
        Err(e) if args.cluster.chooses_a_cluster() => {
            return Err(e.context(
                "nothing was installed and nothing was changed (the embedded management cluster is started only when no kubeconfig chooses a cluster)",
            ));
        }
        Err(_) => None,
    };
    let server = match args.cluster.config().await {
        Ok(c) => c.cluster_url.to_string(),
        Err(_) => String::new(),
    };
    match configured {
        Some(Unanswered::Refused(why)) => anyhow::bail!(
            "the management cluster at {server} refused this kubeconfig's credentials ({why}); nothing was installed and nothing was changed: fix the credentials, or choose another cluster with --kubeconfig or --kubeconfig-context"
        ),
        Some(Unanswered::Unreachable(why)) if args.cluster.kubeconfig.is_some() => anyhow::bail!(
            "the management cluster at {server} (from {}) does not answer: {why}; check it runs, or leave --kubeconfig out to use the embedded one",
            args.cluster.kubeconfig.as_ref().unwrap().display()
        ),
        None if args.cluster.kubeconfig.is_some() => anyhow::bail!(
            "the kubeconfig {} cannot be used; check it, or leave --kubeconfig out to use the embedded one",
            args.cluster.kubeconfig.as_ref().unwrap().display()
        ),
        _ => {}
    }
    match if args.yes {
        Some(true)
    } else {
        ask_to_start()?
    } {
        Some(true) => {
            let before = current_context();
            let options = crate::management::ServeOptions {
                dir: crate::management::StateDir::new(None),
                listen: "127.0.0.1:0".into(),
                kubeconfig: Some(crate::management::kubeconfig_path(None)),
                context: crate::management::DEFAULT_CONTEXT.into(),
                etcd_endpoints: Vec::new(),
                etcd_tls: None,
                audit: Default::default(),
                limits: Default::default(),
                tls_sans: Vec::new(),
                autoscaler: false,
            };
            super::management::up(&options).await?;
            if let Some(before) = before.filter(|b| b != crate::management::DEFAULT_CONTEXT) {
                eprintln!(
                    "Switched the current kubeconfig context from {before:?} to {:?} (`kubectl config use-context {before}` goes back)",
                    crate::management::DEFAULT_CONTEXT
                );
            }
            Ok(args.cluster.client().await?.0)
        }
        Some(false) => anyhow::bail!(
            "nothing was installed: no management cluster is reachable and the embedded one was not started; point --kubeconfig at one, or start the embedded one with `capictl management up`"
        ),
        None => anyhow::bail!(
            "no management cluster is reachable: start the embedded one with `capictl management up`, or rerun with --yes to have init start it"
        ),
    }
}

pub(super) async fn init(args: Args) -> anyhow::Result<()> {
    // Flags are checked before a management cluster is looked for.
    args.providers.requested(false)?;
    let client = connect(&args).await?;
    let embedded = is_embedded(&client).await;
    // The inventory first: it says whether this is the first run.
    for crd in crate::api::CrdSet::Clusterctl.crds() {
        apply(&client, &serde_json::to_value(crd)?).await?;
    }
    let inventory: Api<Provider> = Api::all(client.clone());
    let installed = list_with_retry(&inventory).await?;
    let first_run = !installed
        .iter()
        .any(|p| p.spec.type_.as_deref() == Some("CoreProvider"));
    eprintln!("Fetching providers");
    let requested = args.providers.requested(first_run)?;
    let version = format!("v{}", crate::build_info::VERSION);
    let mut installing = Vec::new();
    for p in &requested {
        let namespace = args.target_namespace.as_deref().unwrap_or(p.namespace);
        if installed.iter().any(|i| {
            i.name_any() == p.label()
                && i.namespace().as_deref() == Some(namespace)
                && i.spec.version.as_deref() == Some(version.as_str())
        }) {
            continue;
        }
        eprintln!(
            "Installing provider={:?} version={version:?} targetNamespace={namespace:?}",
            p.label()
        );
        let mut objects = init::components(p, &args.image, namespace, !embedded);
        if !embedded && p.serves_webhooks() {
            // The namespace first, for the webhook certificate's Secret.
            apply(&client, &objects[0]).await?;
            let ca = webhook_ca(&client, p, namespace).await?;
            objects = init::with_ca_bundle(objects, &ca);
        }
        for object in &objects {
            apply(&client, object).await?;
        }
        apply(&client, &init::inventory(p, &version, namespace)).await?;
        installing.push((p, namespace));
    }
    args.wait.wait(&client, &installing, embedded).await?;
    if first_run && args.next_steps {
        eprintln!("\nYour management cluster has been initialized successfully!\n");
        if embedded {
            eprintln!("The providers' controllers run inside the embedded management cluster.\n");
        }
        eprintln!("You can now create your first workload cluster by running the following:\n");
        eprintln!(
            "  capictl generate cluster [name] --kubernetes-version [version] | kubectl apply -f -\n"
        );
    }
    Ok(())
}

/// Waits, with a spinner per provider, until each is ready: every CRD Established and, unless
/// its controllers run inside the embedded cluster, its Deployment Available.
pub(super) async fn wait_for_providers(
    client: &Client,
    providers: &[(&ProviderInfo, &str)],
    embedded: bool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let bars = indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
    let waits = providers.iter().map(|(p, namespace)| {
        let bar = bars.add(indicatif::ProgressBar::new_spinner());
        bar.enable_steady_tick(Duration::from_millis(120));
        async move {
            let started = tokio::time::Instant::now();
            loop {
                let missing = not_ready(client, p, namespace, embedded).await;
                let Some(missing) = missing else {
                    bar.finish_with_message(format!("{} is ready", p.label()));
                    return Ok(());
                };
                if started.elapsed() >= timeout {
                    bar.abandon_with_message(format!("{} is not ready", p.label()));
                    anyhow::bail!(
                        "provider {} was not ready after {}s: {missing}",
                        p.label(),
                        timeout.as_secs()
                    );
                }
                bar.set_message(format!("Waiting for {}: {missing}", p.label()));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });
    futures::future::try_join_all(waits).await?;
    Ok(())
}

/// What a provider still waits for, or None when it is ready.
async fn not_ready(
    client: &Client,
    p: &ProviderInfo,
    namespace: &str,
    embedded: bool,
) -> Option<String> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in p.crds.crds() {
        let name = crd.name_any();
        let established = crds.get_opt(&name).await.ok().flatten().is_some_and(|c| {
            c.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        if !established {
            return Some(format!("CRD {name} is not established yet"));
        }
    }
    if embedded {
        return None;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let available = deployments
        .get_opt(p.deployment)
        .await
        .ok()
        .flatten()
        .and_then(|d| d.status)
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True"));
    (!available).then(|| {
        format!(
            "Deployment {namespace}/{} is not available yet (kubectl -n {namespace} describe deployment {} tells why)",
            p.deployment, p.deployment
        )
    })
}

/// The CA of the provider's webhook serving certificate: the one in its Secret, or, on the first
/// install, a new CA and certificate written there — capictl's stand-in for cert-manager. A
/// later init keeps them, so running managers go on serving what the API server trusts.
pub(super) async fn webhook_ca(
    client: &Client,
    p: &ProviderInfo,
    namespace: &str,
) -> anyhow::Result<String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = p.webhook_secret();
    let ca_of = |s: &Secret| {
        s.data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    if let Some(ca) = secrets.get_opt(&name).await?.as_ref().and_then(ca_of) {
        return Ok(ca);
    }
    let pki = Pki::generate(&format!("{} webhook CA", p.label()))?;
    let serving = pki.serving_certificate(&init::webhook_hosts(p, namespace))?;
    let secret: Secret =
        serde_json::from_value(init::webhook_secret(p, namespace, &pki.ca.cert, &serving))?;
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(pki.ca.cert),
        // Another init got there first: use what it made.
        Err(kube::Error::Api(e)) if e.code == 409 => secrets
            .get(&name)
            .await
            .ok()
            .as_ref()
            .and_then(ca_of)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "Secret {namespace}/{name} has no ca.crt; delete it and run init again"
                )
            }),
        Err(e) => Err(anyhow::anyhow!(
            "creating the webhook certificate Secret {namespace}/{name}: {e}"
        )),
    }
}

/// The inventory, once its CRD is served (a real API server takes a moment).
async fn list_with_retry(api: &Api<Provider>) -> anyhow::Result<Vec<Provider>> {
    let mut tries = 0;
    loop {
        match api.list(&Default::default()).await {
            Ok(list) => return Ok(list.items),
            Err(e) if tries < 50 => {
                tracing::debug!(error = %e, "waiting for the inventory CRD to be served");
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

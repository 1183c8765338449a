//! `capictl generate`: YAML for CRDs, cluster templates and provider components.

use std::io::Write;

use clap::Subcommand;

use crate::api::{self, CrdSet};

#[derive(Debug, Subcommand)]
pub enum Generate {
    /// The CustomResourceDefinitions of one or more providers, ready for `kubectl apply -f -`.
    Crds(CrdsArgs),
    /// A workload cluster's objects from a flavor template (or any clusterctl template).
    Cluster(Box<TemplateArgs>),
    /// A provider's components, as `init` would install them.
    Provider(ProviderArgs),
    /// Any YAML with its `${VARIABLES}` filled in from the environment and the clusterctl
    /// configuration file, as templates are.
    Yaml(YamlArgs),
}

#[derive(Debug, clap::Args)]
pub struct YamlArgs {
    /// The YAML file (`-` reads stdin).
    #[arg(long, value_name = "FILE", default_value = "-")]
    from: String,
    /// List the variables the YAML names instead of rendering it.
    #[arg(long)]
    list_variables: bool,
    /// The clusterctl configuration file with variable values [default: $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml, else ~/.cluster-api/clusterctl.yaml]
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
}

fn generate_yaml(args: &YamlArgs) -> anyhow::Result<()> {
    let text = read_template(&args.from)?;
    let output = if args.list_variables {
        crate::generate::list_yaml_variables(&text)?
    } else {
        let config = config_variables(args.config.as_deref())?;
        let lookup = |name: &str| {
            let key = name.to_uppercase().replace('-', "_");
            std::env::var(&key)
                .ok()
                .or_else(|| config.get(&key).cloned())
        };
        format!(
            "{}\n",
            crate::generate::render_yaml(&text, &lookup)?.trim_end_matches('\n')
        )
    };
    std::io::stdout().lock().write_all(output.as_bytes())?;
    Ok(())
}

/// A template from a file, or stdin for `-`.
fn read_template(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        return Ok(std::io::read_to_string(std::io::stdin())?);
    }
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading the template {path}: {e}"))
}

#[derive(Debug, clap::Args)]
// The provider is one of these four; the namespace and image only go with one of them. (A
// struct-level group would also take `--image` and `--target-namespace` as the provider.)
#[command(group(
    clap::ArgGroup::new("kind")
        .required(true)
        .multiple(false)
        .args(["core", "bootstrap", "control_plane", "infrastructure"])
))]
pub struct ProviderArgs {
    /// The core provider: cluster-api.
    #[arg(long, value_name = "NAME")]
    core: Option<String>,
    /// A bootstrap provider: kubeadm.
    #[arg(short, long, value_name = "NAME")]
    bootstrap: Option<String>,
    /// A control plane provider: kubeadm.
    #[arg(short, long, value_name = "NAME")]
    control_plane: Option<String>,
    /// An infrastructure provider: docker, in-memory.
    #[arg(short, long, value_name = "NAME")]
    infrastructure: Option<String>,
    /// The namespace to install into [default: the provider's own]
    #[arg(short = 'n', long, value_name = "NS")]
    target_namespace: Option<String>,
    /// The image the controller Deployment runs.
    #[arg(long, value_name = "IMAGE", default_value_t = crate::build_info::controller_image())]
    image: String,
}

fn generate_provider(args: &ProviderArgs) -> anyhow::Result<()> {
    let (type_, name) = [
        ("CoreProvider", &args.core),
        ("BootstrapProvider", &args.bootstrap),
        ("ControlPlaneProvider", &args.control_plane),
        ("InfrastructureProvider", &args.infrastructure),
    ]
    .into_iter()
    .find_map(|(t, n)| n.as_ref().map(|n| (t, n)))
    .expect("clap requires one");
    let provider = crate::init::find(type_, name).map_err(super::UsageError)?;
    let namespace = args
        .target_namespace
        .as_deref()
        .unwrap_or(provider.namespace);
    let objects = crate::init::components(&provider, &args.image, namespace, true);
    let text = crate::yaml::to_multiple(&objects)?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Which provider's CRDs; repeat or separate with commas.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    provider: Vec<CrdChoice>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CrdChoice {
    Core,
    KubeadmBootstrap,
    KubeadmControlPlane,
    Docker,
    InMemory,
    Clusterctl,
    All,
}

impl CrdChoice {
    fn sets(self) -> Vec<CrdSet> {
        match self {
            CrdChoice::Core => vec![CrdSet::Core],
            CrdChoice::KubeadmBootstrap => vec![CrdSet::KubeadmBootstrap],
            CrdChoice::KubeadmControlPlane => vec![CrdSet::KubeadmControlPlane],
            CrdChoice::Docker => vec![CrdSet::Docker],
            CrdChoice::InMemory => vec![CrdSet::InMemory],
            CrdChoice::Clusterctl => vec![CrdSet::Clusterctl],
            CrdChoice::All => CrdSet::ALL.to_vec(),
        }
    }
}

impl Generate {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Generate::Crds(args) => {
                let mut sets: Vec<CrdSet> = args.provider.iter().flat_map(|c| c.sets()).collect();
                sets.sort_unstable();
                sets.dedup();
                // Each set's CRDs as its provider installs them in its default namespace.
                let crds: Vec<serde_json::Value> = sets
                    .iter()
                    .flat_map(
                        |set| match crate::init::PROVIDERS.iter().find(|p| p.crds == *set) {
                            Some(p) => p.crds(p.namespace),
                            None => set
                                .crds()
                                .into_iter()
                                .map(|crd| serde_json::to_value(crd).expect("CRDs serialize"))
                                .collect(),
                        },
                    )
                    .collect();
                let text = crate::yaml::to_multiple(&crds)?;
                std::io::stdout().lock().write_all(text.as_bytes())?;
                Ok(())
            }
            Generate::Cluster(args) => generate_cluster(*args),
            Generate::Provider(args) => generate_provider(&args),
            Generate::Yaml(args) => generate_yaml(&args),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct TemplateArgs {
    /// The name of the cluster (`${CLUSTER_NAME}`).
    name: String,
    /// The flavor: `cluster-template-<flavor>.yaml` of the provider.
    #[arg(short, long)]
    flavor: Option<String>,
    /// The infrastructure provider whose templates to use: docker or in-memory[:version].
    #[arg(short, long, value_name = "NAME[:VERSION]")]
    infrastructure: Option<String>,
    /// `${KUBERNETES_VERSION}`, e.g. v1.30.4.
    #[arg(long, value_name = "VERSION")]
    kubernetes_version: Option<String>,
    /// `${CONTROL_PLANE_MACHINE_COUNT}` [default: from the environment, else 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    control_plane_machine_count: Option<i64>,
    /// `${WORKER_MACHINE_COUNT}` [default: from the environment, else 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    worker_machine_count: Option<i64>,
    /// The namespace of the objects (`${NAMESPACE}`) [default: the kubeconfig context's, else default]
    #[arg(short = 'n', long, value_name = "NS")]
    target_namespace: Option<String>,
    /// A template file to use instead of a flavor (`-` reads stdin).
    #[arg(long, value_name = "FILE")]
    from: Option<String>,
    /// A ConfigMap of the management cluster holding the template.
    #[arg(long, value_name = "NAME")]
    from_config_map: Option<String>,
    /// The ConfigMap's namespace [default: the kubeconfig context's, else default]
    #[arg(long, value_name = "NS", requires = "from_config_map")]
    from_config_map_namespace: Option<String>,
    /// The ConfigMap's key holding the template.
    #[arg(
        long,
        value_name = "KEY",
        default_value = "template",
        requires = "from_config_map"
    )]
    from_config_map_key: String,
    /// List the template's variables instead of rendering it.
    #[arg(long)]
    list_variables: bool,
    /// Write to this file (mode 0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    write_to: Option<std::path::PathBuf>,
    /// The clusterctl configuration file with variable values [default: $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml, else ~/.cluster-api/clusterctl.yaml]
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Where --infrastructure defaults from: the management cluster's installed provider.
    #[command(flatten)]
    cluster: super::connect::ClusterArgs,
}

/// The infrastructure provider when `--infrastructure` is not given, as clusterctl picks it:
/// the one the management cluster has installed; more than one, or none, is the user's to
/// choose. Without a management cluster to ask, the Docker provider's templates. With the
/// choice, what to tell the user once the cluster is generated.
fn default_infrastructure(
    cluster: &super::connect::ClusterArgs,
) -> anyhow::Result<(String, String)> {
    use super::UsageError;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let installed = runtime.block_on(async {
        let (client, _) = cluster.client().await?;
        let providers = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            kube::Api::<api::Provider>::all(client).list(&Default::default()),
        )
        .await
        .map_err(|_| anyhow::anyhow!("the management cluster did not answer within 5s"))??;
        anyhow::Ok(providers.items)
    });
    let providers = match installed {
        Ok(providers) => providers,
        Err(e) => {
            let note = format!(
                "Generated for the docker provider; --infrastructure chooses another (no management cluster said which is installed: {e:#})"
            );
            return Ok(("docker".into(), note));
        }
    };
    let mut names: Vec<String> = providers
        .iter()
        .filter(|p| p.spec.type_.as_deref() == Some("InfrastructureProvider"))
        .filter_map(|p| p.spec.provider_name.clone())
        .collect();
    names.sort();
    names.dedup();
    match names.as_slice() {
        [one] => Ok((
            one.clone(),
            format!("Using the {one} infrastructure provider, the one installed in the management cluster"),
        )),
        [] => Err(UsageError(
            "no infrastructure provider is installed in the management cluster: install one with `capictl init --infrastructure <name>`, or choose the templates with --infrastructure".into(),
        )
        .into()),
        many => Err(UsageError(format!(
            "more than one infrastructure provider is installed ({}): choose one with --infrastructure",
            many.join(", ")
        ))
        .into()),
    }
}

/// Variable values from the clusterctl configuration file (keys are case-insensitive).
fn config_variables(
    path: Option<&std::path::Path>,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    let candidates = match path {
        Some(p) => vec![p.to_path_buf()],
        None => vec![
            xdg.join("cluster-api/clusterctl.yaml"),
            home.join(".cluster-api/clusterctl.yaml"),
        ],
    };
    let Some(file) = candidates.into_iter().find(|p| p.exists()) else {
        if let Some(p) = path {
            return Err(
                super::UsageError(format!("--config {}: no such file", p.display())).into(),
            );
        }
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(&file)?;
    let value: serde_json::Value =
        crate::yaml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    Ok(value
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    let text = match v {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => v.to_string(),
                        _ => return None,
                    };
                    Some((k.to_uppercase().replace('-', "_"), text))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The namespace of the current kubeconfig context, if there is one.
fn kubeconfig_namespace() -> Option<String> {
    let config = kube::config::Kubeconfig::read().ok()?;
    let current = config.current_context.clone()?;
    config
        .contexts
        .into_iter()
        .find(|c| c.name == current)?
        .context?
        .namespace
}

fn is_semver(v: &str) -> bool {
    let v = v.strip_prefix('v').unwrap_or(v);
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// The template kept in a ConfigMap of the management cluster.
fn template_from_config_map(args: &TemplateArgs, name: &str) -> anyhow::Result<String> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (client, default_namespace) = args.cluster.client().await?;
        let namespace = args
            .from_config_map_namespace
            .clone()
            .unwrap_or(default_namespace);
        let map = kube::Api::<ConfigMap>::namespaced(client, &namespace)
            .get_opt(name)
            .await?
            .ok_or_else(|| {
                super::UsageError(format!(
                    "there is no ConfigMap {namespace}/{name} in the management cluster"
                ))
            })?;
        let key = &args.from_config_map_key;
        map.data
            .and_then(|mut d| d.remove(key))
            .ok_or_else(|| {
                super::UsageError(format!(
                    "the ConfigMap {namespace}/{name} does not have the {key:?} data key; name the key with --from-config-map-key"
                ))
                .into()
            })
    })
}

fn generate_cluster(args: TemplateArgs) -> anyhow::Result<()> {
    use super::UsageError;
    if let Some(problem) = crate::apiserver::object::name_problem(&args.name) {
        return Err(UsageError(format!("invalid cluster name {:?}: {problem}", args.name)).into());
    }
    let sources = [
        args.from.is_some(),
        args.from_config_map.is_some(),
        args.flavor.is_some() || args.infrastructure.is_some(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        return Err(UsageError("invalid cluster template source: only one template can be used at time; give one of --from, --from-config-map, or --flavor/--infrastructure".into()).into());
    }
    if let Some(v) = &args.kubernetes_version
        && !is_semver(v)
    {
        return Err(UsageError(format!(
            "invalid --kubernetes-version {v:?}: use a semantic version such as v1.30.4"
        ))
        .into());
    }
    if args.control_plane_machine_count.is_some_and(|n| n < 1) {
        return Err(UsageError("--control-plane-machine-count must be at least 1".into()).into());
    }
    if args.worker_machine_count.is_some_and(|n| n < 0) {
        return Err(UsageError("--worker-machine-count must be 0 or more".into()).into());
    }
    let namespace = match &args.target_namespace {
        Some(ns) => {
            if let Some(problem) = crate::apiserver::object::name_problem(ns)
                .or_else(|| ns.contains('.').then(|| "must not contain dots".into()))
            {
                return Err(
                    UsageError(format!("invalid --target-namespace {ns:?}: {problem}")).into(),
                );
            }
            ns.clone()
        }
        None => kubeconfig_namespace().unwrap_or_else(|| "default".into()),
    };
    // Which infrastructure provider was chosen for the user, said once the cluster is made.
    let mut chosen = None;
    let template = match (&args.from, &args.from_config_map) {
        (Some(path), _) => read_template(path)?,
        (None, Some(name)) => template_from_config_map(&args, name)?,
        (None, None) => {
            let provider = match &args.infrastructure {
                Some(p) => p.clone(),
                None => {
                    let (provider, note) = default_infrastructure(&args.cluster)?;
                    chosen = Some(note);
                    provider
                }
            };
            let name = provider.split(':').next().unwrap_or(&provider);
            crate::generate::flavor_with_class(name, args.flavor.as_deref().unwrap_or_default())
                .map_err(|e| UsageError(e.to_string()))?
        }
    };
    let config = config_variables(args.config.as_deref())?;
    let env_or_config = |key: &str| std::env::var(key).ok().or_else(|| config.get(key).cloned());
    let mut builtins = std::collections::BTreeMap::new();
    builtins.insert("CLUSTER_NAME".to_string(), args.name.clone());
    builtins.insert("NAMESPACE".to_string(), namespace.clone());
    if let Some(v) = &args.kubernetes_version {
        builtins.insert("KUBERNETES_VERSION".to_string(), v.clone());
    }
    for (key, flag, default) in [
        (
            "CONTROL_PLANE_MACHINE_COUNT",
            args.control_plane_machine_count,
            1,
        ),
        ("WORKER_MACHINE_COUNT", args.worker_machine_count, 0),
    ] {
        let value = match flag {
            Some(n) => n.to_string(),
            None => match env_or_config(key) {
                Some(v) if v.parse::<i64>().is_ok() => v,
                Some(_) => return Err(UsageError(format!("invalid value for {key} set")).into()),
                None => default.to_string(),
            },
        };
        builtins.insert(key.to_string(), value);
    }
    let output = if args.list_variables {
        let mut overrides = builtins.clone();
        if args.target_namespace.is_none() {
            overrides.insert(
                "NAMESPACE".into(),
                "current Namespace in the KubeConfig file".into(),
            );
        }
        if args.kubernetes_version.is_none() {
            overrides.remove("KUBERNETES_VERSION");
            if let Ok(v) = std::env::var("KUBERNETES_VERSION") {
                overrides.insert("KUBERNETES_VERSION".into(), v);
            }
        }
        crate::generate::list_variables(&template, &overrides)?
    } else {
        let lookup = |name: &str| {
            let key = name.to_uppercase().replace('-', "_");
            builtins.get(&key).cloned().or_else(|| env_or_config(&key))
        };
        // One final newline, as clusterctl writes it.
        format!(
            "{}\n",
            crate::generate::render(&template, &namespace, &lookup)?.trim_end_matches('\n')
        )
    };
    match args.write_to.as_deref().filter(|p| p.as_os_str() != "-") {
        Some(path) => crate::pki::write_private(path, output.as_bytes())
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?,
        None => std::io::stdout().lock().write_all(output.as_bytes())?,
    }
    if let Some(note) = chosen {
        eprintln!("{note}");
    }
    Ok(())
}

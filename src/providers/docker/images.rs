//! capictl's own node and load-balancer images, built on this host from Debian packages, so
//! that Docker clusters come up where no registry can be reached and no Kubernetes binaries are
//! installed.
//!
//! One root filesystem is made with `debootstrap --variant=minbase` of the host's own Debian
//! release (so that capictl's binary, linked against the host's glibc, runs inside), from the
//! package mirror the host's apt sources name, with etcd, HAProxy and the few tools the Docker
//! provider's exec contract needs. It is imported once through the Engine API as
//! [`ROOTFS_REPOSITORY`]`:<release>`: the Engine is the cache. From it:
//!
//! - the load balancer, [`LOAD_BALANCER_REPOSITORY`]`:<release>`: HAProxy in master-worker
//!   mode on kind's config path, with a `maxconn`, as upstream's Docker provider runs
//!   `kindest/haproxy`;
//! - a node per Kubernetes version, [`NODE_REPOSITORY`]`:<version>`: this capictl binary copied
//!   in as the node agent (PID 1), `kubeadm`, `crictl` and `ctr`. The version is what the agent
//!   reports as the Node's kubeletVersion. The image is labelled with the binary's digest and
//!   rebuilt when capictl changes, so a node always runs the agent of the capictl that made it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bollard::Docker;
use bollard::query_parameters::{BuildImageOptions, CreateImageOptions};
use futures::StreamExt;
use tokio::io::AsyncReadExt;

/// The root filesystem every capictl image is built from, tagged by Debian release.
pub const ROOTFS_REPOSITORY: &str = "capictl/rootfs";
/// The load balancer image, tagged by Debian release.
pub const LOAD_BALANCER_REPOSITORY: &str = "capictl/haproxy";
/// The node images, tagged by Kubernetes version.
pub const NODE_REPOSITORY: &str = "capictl/node";
/// Set on every image capictl builds; its value says what the image is.
pub const ROLE_LABEL: &str = "io.x-k8s.capictl.image";
/// On node images: the Kubernetes version the node reports.
pub const NODE_LABEL: &str = "io.x-k8s.capictl.node";
/// On node images: the SHA-256 of the capictl binary inside.
pub const BINARY_LABEL: &str = "io.x-k8s.capictl.binary";
use crate::node::image::{NODE_BINARY, VERSION_ENV};

/// Where HAProxy's configuration lives in the load balancer (kind's path, which the Docker
/// provider writes to).
pub const HAPROXY_CONFIG: &str = "/usr/local/etc/haproxy/haproxy.cfg";

/// The Debian packages in every image beyond minbase (busybox-static for the workload image,
/// iptables for the Services' rules the kubelet writes in each Pod's namespace).
const PACKAGES: &[&str] = &[
    "etcd-server",
    "haproxy",
    "iproute2",
    "iptables",
    "ca-certificates",
    "procps",
    "busybox-static",
];
/// On the root filesystem: the packages it was made with, so that a change to [`PACKAGES`]
/// makes it again.
const PACKAGES_LABEL: &str = "io.x-k8s.capictl.packages";
/// A small image to try workloads with where no registry can be reached: busybox (a shell,
/// `httpd`, `wget`, `nslookup`, ...) and nothing else, tagged by Debian release.
pub const BUSYBOX_REPOSITORY: &str = "capictl/busybox";

/// The names under which a node runs capictl as another program (dispatched on argv[0]).
pub const NODE_ALIASES: &[&str] = &["kubeadm", "crictl", "ctr"];

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot reach the Docker Engine: {0}")]
    Engine(#[from] bollard::errors::Error),
    #[error(
        "{0}\nIf these images can be built on another machine, copy them here instead: \
         `docker save capictl/rootfs capictl/haproxy capictl/node | ssh <this host> docker load`"
    )]
    Rootfs(String),
    #[error("building {image}: {message}")]
    Build { image: String, message: String },
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Kubernetes versions to build node images for (`v1.28.13`).
    pub versions: Vec<String>,
    /// Rebuild what exists, the root filesystem included.
    pub force: bool,
    /// The Debian mirror; else the one this host's apt sources name.
    pub mirror: Option<String>,
    /// The capictl binary to put in the nodes and the controller image.
    pub binary: PathBuf,
    /// The controller image to build (`capictl:v<version>`).
    pub controller_image: String,
    /// Where debootstrap works (removed afterwards).
    pub work_dir: PathBuf,
}

/// What a build made or found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    pub image: String,
    /// Already there and up to date, so not built again.
    pub reused: bool,
}

/// The load balancer image's tag on this host.
pub fn load_balancer_image(release: &str) -> String {
    format!("{LOAD_BALANCER_REPOSITORY}:{release}")
}

/// The workload image's tag on this host.
pub fn busybox_image(release: &str) -> String {
    format!("{BUSYBOX_REPOSITORY}:{release}")
}

/// The node image's tag for a Kubernetes version.
pub fn node_image(version: &str) -> String {
    format!("{NODE_REPOSITORY}:{version}")
}

/// `v1.28.13` as Kubernetes writes versions; a leading `v` is added when missing.
pub fn normalize_version(version: &str) -> Result<String, ImageError> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.parse::<u32>().is_err()) {
        return Err(ImageError::Invalid(format!(
            "--kubernetes-version {version:?} is not a Kubernetes version: write it as v1.28.13"
        )));
    }
    Ok(format!("v{v}"))
}

/// This host's Debian (or Ubuntu) release codename, from os-release.
pub fn host_release(os_release: &str) -> Option<String> {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// The package mirror that apt's sources name for `release`: the first `deb` entry serving that
/// suite itself (not `-updates` or `-security`), from one-line `sources.list` files and from
/// deb822 `.sources` files alike. Entries with options (`deb [signed-by=…] URI …`) count.
pub fn mirror_from_sources(files: &[(String, String)], release: &str) -> Option<String> {
    for (name, text) in files {
        if name.ends_with(".sources") {
            for stanza in text.split("\n\n") {
                let field = |key: &str| {
                    stanza.lines().find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().to_string())
                    })
                };
                let enabled = field("Enabled").is_none_or(|v| v != "no");
                let deb = field("Types").is_some_and(|t| t.split_whitespace().any(|t| t == "deb"));
                let serves =
                    field("Suites").is_some_and(|s| s.split_whitespace().any(|s| s == release));
                if enabled
                    && deb
                    && serves
                    && let Some(uri) = field("URIs").and_then(|u| {
                        u.split_whitespace()
                            .find(|u| u.starts_with("http"))
                            .map(String::from)
                    })
                {
                    return Some(uri);
                }
            }
        } else {
            for line in text.lines() {
                let line = line.split('#').next().unwrap_or_default();
                let mut words = line.split_whitespace().peekable();
                if words.next() != Some("deb") {
                    continue;
                }
                if words.peek().is_some_and(|w| w.starts_with('[')) {
                    for w in words.by_ref() {
                        if w.ends_with(']') {
                            break;
                        }
                    }
                }
                if let (Some(uri), Some(suite)) = (words.next(), words.next())
                    && suite == release
                    && uri.starts_with("http")
                {
                    return Some(uri.to_string());
                }
            }
        }
    }
    None
}

/// The mirror this host's apt uses for `release`.
fn host_mirror(release: &str) -> Result<String, ImageError> {
    let mut files = Vec::new();
    let mut paths = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        paths.extend(more);
    }
    for path in paths {
        let name = path.display().to_string();
        if (name.ends_with(".list") || name.ends_with(".sources"))
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            files.push((name, text));
        }
    }
    mirror_from_sources(&files, release).ok_or_else(|| {
        ImageError::Rootfs(format!(
            "no apt source on this host serves Debian {release}: name a mirror with --mirror URL"
        ))
    })
}

/// The SHA-256 of a file, hex.
fn file_digest(path: &Path) -> Result<String, ImageError> {
    let bytes = std::fs::read(path).map_err(io_error(path))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    Ok(crate::pki::hex(digest.as_ref()))
}

/// An image's labels; None when the image is not there.
async fn labels_of(
    docker: &Docker,
    image: &str,
) -> Result<Option<HashMap<String, String>>, ImageError> {
    match docker.inspect_image(image).await {
        Ok(i) => Ok(Some(i.config.and_then(|c| c.labels).unwrap_or_default())),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether `image` exists on this Engine.
pub async fn exists(docker: &Docker, image: &str) -> Result<bool, ImageError> {
    Ok(labels_of(docker, image).await?.is_some())
}

/// Builds what is missing (everything, with `force`) and says what each step does through
/// `progress`.
pub async fn build(
    docker: &Docker,
    options: &BuildOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<Built>, ImageError> {
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let release = host_release(&os_release).ok_or_else(|| {
        ImageError::Rootfs(
            "this host's /etc/os-release names no release (VERSION_CODENAME): capictl builds its images with debootstrap of the host's own Debian release".into(),
        )
    })?;
    let versions = options
        .versions
        .iter()
        .map(|v| normalize_version(v))
        .collect::<Result<Vec<_>, _>>()?;
    let rootfs = format!("{ROOTFS_REPOSITORY}:{release}");
    let mut built = Vec::new();
    let made_with = labels_of(docker, &rootfs)
        .await?
        .and_then(|l| l.get(PACKAGES_LABEL).cloned());
    let rootfs_fresh = options.force || made_with != Some(PACKAGES.join(","));
    if rootfs_fresh {
        let mirror = match &options.mirror {
            Some(m) => m.clone(),
            None => host_mirror(&release)?,
        };
        progress(&format!(
            "debootstrap of Debian {release} from {mirror} (about a minute)"
        ));
        make_rootfs(
            docker,
            &rootfs,
            &release,
            &mirror,
            &options.work_dir,
            progress,
        )
        .await?;
    }
    built.push(Built {
        image: rootfs.clone(),
        reused: !rootfs_fresh,
    });

    let lb = load_balancer_image(&release);
    let lb_fresh = rootfs_fresh || !exists(docker, &lb).await?;
    if lb_fresh {
        progress(&format!("building {lb}"));
        let dockerfile = format!(
            "FROM {rootfs}\n\
             COPY haproxy.cfg {HAPROXY_CONFIG}\n\
             LABEL {ROLE_LABEL}=load-balancer\n\
             STOPSIGNAL SIGUSR1\n\
             ENTRYPOINT [\"haproxy\", \"-W\", \"-db\", \"-f\", \"{HAPROXY_CONFIG}\"]\n"
        );
        let context = context_tar(&[
            ("Dockerfile", dockerfile.into_bytes(), 0o644),
            (
                "haproxy.cfg",
                crate::providers::docker::haproxy::INITIAL_CONFIG
                    .as_bytes()
                    .to_vec(),
                0o644,
            ),
        ])?;
        build_from_context(docker, &lb, context).await?;
    }
    built.push(Built {
        image: lb,
        reused: !lb_fresh,
    });

    let busybox = busybox_image(&release);
    let busybox_fresh = rootfs_fresh || !exists(docker, &busybox).await?;
    if busybox_fresh {
        progress(&format!("building {busybox}"));
        // busybox alone: its applets linked in /bin, from the root filesystem's package.
        let dockerfile = format!(
            "FROM {rootfs} AS debian\n\
             FROM scratch\n\
             COPY --from=debian /bin/busybox /bin/busybox\n\
             RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
             RUN [\"/bin/busybox\", \"mkdir\", \"-p\", \"/tmp\", \"/var/www\", \"/root\"]\n\
             ENV PATH=/bin\n\
             LABEL {ROLE_LABEL}=busybox\n\
             CMD [\"/bin/sh\"]\n"
        );
        let context = context_tar(&[("Dockerfile", dockerfile.into_bytes(), 0o644)])?;
        build_from_context(docker, &busybox, context).await?;
    }
    built.push(Built {
        image: busybox,
        reused: !busybox_fresh,
    });

    let digest = file_digest(&options.binary)?;
    // The images that carry capictl are current while they carry this binary on this root
    // filesystem.
    let current = async |image: &str| -> Result<bool, ImageError> {
        Ok(!rootfs_fresh
            && labels_of(docker, image)
                .await?
                .is_some_and(|l| l.get(BINARY_LABEL) == Some(&digest)))
    };
    let controller = options.controller_image.clone();
    let fresh = !current(&controller).await?;
    if fresh {
        progress(&format!("building {controller}"));
        build_controller_image(docker, &rootfs, &controller, &options.binary, &digest).await?;
    }
    built.push(Built {
        image: controller,
        reused: !fresh,
    });
    for version in versions {
        let image = node_image(&version);
        let fresh = !current(&image).await?;
        if fresh {
            progress(&format!("building {image}"));
            build_node_image(docker, &rootfs, &version, &options.binary, &digest).await?;
        }
        built.push(Built {
            image,
            reused: !fresh,
        });
    }
    Ok(built)
}

/// The controller image (what `init`'s Deployments run: `capictl manager`) from the root
/// filesystem `rootfs`, with `binary` in it, running as the non-root user the Deployments
/// name (65532, as upstream's distroless images).
async fn build_controller_image(
    docker: &Docker,
    rootfs: &str,
    image: &str,
    binary: &Path,
    digest: &str,
) -> Result<(), ImageError> {
    let dockerfile = format!(
        "FROM {rootfs}\n\
         COPY capictl {CONTROLLER_BINARY}\n\
         LABEL {ROLE_LABEL}=controller {BINARY_LABEL}={digest}\n\
         USER 65532:65532\n\
         WORKDIR /\n\
         ENTRYPOINT [\"{CONTROLLER_BINARY}\"]\n\
         CMD [\"manager\"]\n"
    );
    build_with_binary(docker, image, dockerfile, binary).await
}

/// Builds `image` from `dockerfile`, whose context holds `binary` as `capictl`.
async fn build_with_binary(
    docker: &Docker,
    image: &str,
    dockerfile: String,
    binary: &Path,
) -> Result<(), ImageError> {
    let bytes = std::fs::read(binary).map_err(io_error(binary))?;
    let context = context_tar(&[
        ("Dockerfile", dockerfile.into_bytes(), 0o644),
        ("capictl", bytes, 0o755),
    ])?;
    build_from_context(docker, image, context).await
}

/// Where the controller image keeps capictl (its `command` in `init`'s Deployments is
/// `capictl`, found on PATH).
const CONTROLLER_BINARY: &str = "/usr/local/bin/capictl";

/// The node image of `version` from the root filesystem `rootfs`, with `binary` in it.
async fn build_node_image(
    docker: &Docker,
    rootfs: &str,
    version: &str,
    binary: &Path,
    digest: &str,
) -> Result<(), ImageError> {
    let image = node_image(version);
    let links = NODE_ALIASES
        .iter()
        .map(|a| format!("ln -sf {NODE_BINARY} /usr/bin/{a}"))
        .collect::<Vec<_>>()
        .join(" && ");
    let dockerfile = format!(
        "FROM {rootfs}\n\
         COPY capictl {NODE_BINARY}\n\
         RUN {links} && mkdir -p /etc/kubernetes/manifests /var/lib/kubelet /var/lib/etcd\n\
         ENV {VERSION_ENV}={version}\n\
         LABEL {ROLE_LABEL}=node {NODE_LABEL}={version} {BINARY_LABEL}={digest}\n\
         STOPSIGNAL SIGTERM\n\
         ENTRYPOINT [\"{NODE_BINARY}\", \"node\", \"agent\"]\n"
    );
    build_with_binary(docker, &image, dockerfile, binary).await
}

/// Builds the node image of `version` when a capictl root filesystem is on this Engine (one
/// layer on top of it, seconds); whether it could. Without the root filesystem (it needs
/// debootstrap and root) nothing is built.
pub async fn build_node(docker: &Docker, version: &str, binary: &Path) -> Result<bool, ImageError> {
    let version = normalize_version(version)?;
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let Some(release) = host_release(&os_release) else {
        return Ok(false);
    };
    let rootfs = format!("{ROOTFS_REPOSITORY}:{release}");
    if !exists(docker, &rootfs).await? {
        return Ok(false);
    }
    let digest = file_digest(binary)?;
    build_node_image(docker, &rootfs, &version, binary, &digest).await?;
    Ok(true)
}

/// This process's own binary when it is capictl (not, say, a test binary), to put in nodes.
pub fn own_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    (exe.file_name()? == "capictl").then_some(exe)
}

/// Whether `image` is one of capictl's node images (runs unprivileged).
pub async fn is_capictl_node(docker: &Docker, image: &str) -> Result<bool, ImageError> {
    Ok(labels_of(docker, image)
        .await?
        .is_some_and(|l| l.get(ROLE_LABEL).map(String::as_str) == Some("node")))
}

/// The tags of capictl's images of a role (`node`, `load-balancer`) on this Engine.
async fn tags_of_role(docker: &Docker, role: &str) -> Result<Vec<String>, ImageError> {
    use bollard::query_parameters::ListImagesOptions;
    let images = docker
        .list_images(Some(ListImagesOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{ROLE_LABEL}={role}")],
            )])),
            ..Default::default()
        }))
        .await?;
    Ok(images.into_iter().flat_map(|i| i.repo_tags).collect())
}

/// capictl's load balancer image on this Engine, if one was built.
pub async fn find_load_balancer(docker: &Docker) -> Result<Option<String>, ImageError> {
    Ok(tags_of_role(docker, "load-balancer")
        .await?
        .into_iter()
        .find(|t| t.starts_with(LOAD_BALANCER_REPOSITORY)))
}

/// The Kubernetes versions of capictl's node images on this Engine.
pub async fn node_versions(docker: &Docker) -> Result<Vec<String>, ImageError> {
    let prefix = format!("{NODE_REPOSITORY}:");
    Ok(tags_of_role(docker, "node")
        .await?
        .into_iter()
        .filter_map(|t| t.strip_prefix(&prefix).map(str::to_string))
        .collect())
}

/// A build context: these files in a tar.
fn context_tar(files: &[(&str, Vec<u8>, u32)]) -> Result<Vec<u8>, ImageError> {
    let mut archive = tar::Builder::new(Vec::new());
    for (name, data, mode) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(*mode);
        header.set_cksum();
        archive
            .append_data(&mut header, name, data.as_slice())
            .map_err(io_error(Path::new(name)))?;
    }
    archive.into_inner().map_err(io_error(Path::new("context")))
}

async fn build_from_context(
    docker: &Docker,
    image: &str,
    context: Vec<u8>,
) -> Result<(), ImageError> {
    let options = BuildImageOptions {
        dockerfile: "Dockerfile".into(),
        t: Some(image.to_string()),
        rm: true,
        forcerm: true,
        ..Default::default()
    };
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    let mut log = String::new();
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| ImageError::Build {
            image: image.into(),
            message: format!("{e}\n{log}"),
        })?;
        if let Some(line) = info.stream {
            log.push_str(&line);
        }
        if let Some(error) = info.error {
            return Err(ImageError::Build {
                image: image.into(),
                message: format!("{error}\n{log}"),
            });
        }
    }
    Ok(())
}

/// debootstrap into `work_dir`, trimmed, imported as `tag`; the directory is removed after.
async fn make_rootfs(
    docker: &Docker,
    tag: &str,
    release: &str,
    mirror: &str,
    work_dir: &Path,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), ImageError> {
    if which("debootstrap").is_none() {
        return Err(ImageError::Rootfs(
            "debootstrap is not installed: install it (`apt-get install debootstrap`) and run `capictl images build` again".into(),
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(ImageError::Rootfs(
            "debootstrap needs root to make the image's root filesystem: run `sudo capictl images build`".into(),
        ));
    }
    let root = work_dir.join(format!("rootfs-{release}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(work_dir).map_err(io_error(work_dir))?;
    let output = tokio::process::Command::new("debootstrap")
        .arg("--variant=minbase")
        .arg(format!("--include={}", PACKAGES.join(",")))
        .arg(release)
        .arg(&root)
        .arg(mirror)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(io_error(Path::new("debootstrap")))?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&root);
        let out = String::from_utf8_lossy(&output.stdout);
        let tail: Vec<&str> = out.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(ImageError::Rootfs(format!(
            "debootstrap of Debian {release} from {mirror} failed ({}):\n{}\n{}\nCheck that the mirror is reachable and serves {release} with the packages {}",
            output.status,
            tail.join("\n"),
            String::from_utf8_lossy(&output.stderr).trim(),
            PACKAGES.join(", "),
        )));
    }
    // What an image never needs: downloaded packages, package lists, documentation.
    for dir in [
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
        "usr/share/locale",
    ] {
        let path = root.join(dir);
        let _ = std::fs::remove_dir_all(&path);
        let _ = std::fs::create_dir_all(&path);
    }
    progress(&format!("importing the root filesystem as {tag}"));
    let result = import(docker, tag, &root).await;
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// `tar -C root -c . | docker import - tag`, through the Engine API.
async fn import(docker: &Docker, tag: &str, root: &Path) -> Result<(), ImageError> {
    let mut tar = tokio::process::Command::new("tar")
        .arg("-C")
        .arg(root)
        .args(["--numeric-owner", "-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(io_error(Path::new("tar")))?;
    let stdout = tar.stdout.take().expect("piped");
    let chunks = futures::stream::unfold(Some(stdout), |reader| async move {
        let mut reader = reader?;
        let mut buf = vec![0u8; 1 << 20];
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((bytes::Bytes::from(buf), Some(reader)))
            }
        }
    });
    let (repo, tag_name) = tag.split_once(':').expect("tags are repo:tag");
    let options = CreateImageOptions {
        from_src: Some("-".into()),
        repo: Some(repo.into()),
        tag: Some(tag_name.into()),
        changes: vec![format!(
            "LABEL {ROLE_LABEL}=rootfs {PACKAGES_LABEL}={}",
            PACKAGES.join(",")
        )],
        ..Default::default()
    };
    let mut stream = docker.create_image(Some(options), Some(bollard::body_stream(chunks)), None);
    while let Some(item) = stream.next().await {
        item.map_err(|e| ImageError::Build {
            image: tag.into(),
            message: e.to_string(),
        })?;
    }
    let status = tar.wait().await.map_err(io_error(Path::new("tar")))?;
    if !status.success() {
        return Err(ImageError::Build {
            image: tag.into(),
            message: format!("tar of {} failed: {status}", root.display()),
        });
    }
    Ok(())
}

/// The path of a program on PATH.
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Files = Vec<(String, String)>;

    fn files(entries: &[(&str, &str)]) -> Files {
        entries
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn the_mirror_comes_from_the_hosts_apt_sources() {
        let deb822 = "Types: deb\n# a snapshot\nURIs: http://deb.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n";
        let cases: &[(&str, Files, Option<&str>)] = &[
            (
                "deb822",
                files(&[("/etc/apt/sources.list.d/debian.sources", deb822)]),
                Some("http://deb.example/debian"),
            ),
            (
                "one-line with options",
                files(&[(
                    "/etc/apt/sources.list",
                    "# comment\ndeb-src http://src.example/debian bookworm main\ndeb [signed-by=/k.gpg arch=amd64] http://one.example/debian bookworm main\n",
                )]),
                Some("http://one.example/debian"),
            ),
            (
                "only updates and security",
                files(&[(
                    "/etc/apt/sources.list",
                    "deb http://x.example/debian bookworm-updates main\ndeb http://x.example/debian-security bookworm-security main\n",
                )]),
                None,
            ),
            (
                "disabled stanza",
                files(&[(
                    "/etc/apt/sources.list.d/a.sources",
                    "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n",
                )]),
                None,
            ),
            (
                "another release",
                files(&[(
                    "/etc/apt/sources.list",
                    "deb http://x.example/debian trixie main\n",
                )]),
                None,
            ),
        ];
        for (name, sources, want) in cases {
            assert_eq!(
                mirror_from_sources(sources, "bookworm").as_deref(),
                *want,
                "{name}"
            );
        }
    }

    #[test]
    fn versions_are_written_as_kubernetes_writes_them() {
        assert_eq!(normalize_version("1.28.13").unwrap(), "v1.28.13");
        assert_eq!(normalize_version("v1.29.10").unwrap(), "v1.29.10");
        let err = normalize_version("latest").unwrap_err().to_string();
        assert!(
            err.contains("--kubernetes-version") && err.contains("v1.28.13"),
            "{err}"
        );
        assert_eq!(
            host_release("NAME=\"Debian\"\nVERSION_CODENAME=bookworm\n").as_deref(),
            Some("bookworm")
        );
        assert_eq!(host_release("NAME=x\n"), None);
    }
}

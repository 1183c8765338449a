//! What every controller runs on, written once: the [`Wiring`] the manager hands each
//! reconciler module (client, shared context, limits, the stop signal), the shared backoff
//! around every reconcile, and the helpers that map a change to the objects to wake.

use std::future::{Future, ready};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::events::Severity;
use super::metrics::{ControllerMetrics, Outcome, queue_key};
use super::{Context, error_policy};
use crate::api::Cluster;

/// What a controller can watch: a kind kube-runtime can cache and share across tasks.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// What a controller needs to run, handed to each reconciler module's `controller` function,
/// which declares what wakes its kind beside its reconcile.
#[derive(Clone)]
pub struct Wiring {
    pub client: Client,
    pub ctx: Arc<Context>,
    pub(crate) config: controller::Config,
    /// Reconciles of one controller at a time (what `config` holds, for the metrics).
    pub(crate) concurrency: u16,
    pub(crate) stop: tokio::sync::watch::Receiver<bool>,
}

impl Wiring {
    /// Resolves when the manager stops: what a controller that is not a [`Controller`] ends
    /// on.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.stop.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// A controller of every object of kind `K`, woken by each change of one; the changes are
    /// counted into the work queue metrics of the controller `name` (which [`Wiring::run`]
    /// must be given too), and wake the objects' owners ([`Context::wake_owners`]).
    pub fn controller<K: Watched>(&self, name: &'static str) -> Controller<K> {
        let queue = self.ctx.metrics.queue(name);
        let (reader, writer) = reflector::store();
        let ctx = self.ctx.clone();
        let changes = watcher(
            Api::<K>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .modify(crate::cache::strip_managed_fields)
        .reflect(writer)
        .inspect(move |event| match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                queue.changed(queue_key(o.meta()));
                ctx.wake_owners(o.meta());
            }
            Ok(watcher::Event::Delete(o)) => {
                queue.deleted(&queue_key(o.meta()));
                ctx.wake_owners(o.meta());
            }
            _ => {}
        })
        .applied_objects();
        Controller::for_stream(changes, reader)
    }

    /// The manager's limits (concurrency, debounce) and its stop signal, on a controller, and
    /// the wake-up when a Cluster is resumed.
    fn limited<K: Watched>(&self, controller: Controller<K>) -> Controller<K> {
        self.wake_on_pause_change(controller)
            .with_config(self.config.clone())
            .graceful_shutdown_on(self.stopped())
    }

    /// Wakes the objects of a Cluster (by its cluster-name label) when it is paused or resumed
    /// (its `spec.paused`, or its claim moving between management clusters): a paused object waits for no event of its own, and resuming (at the end of
    /// `capictl move`, say) must set it going again. The changes come from the shared
    /// Cluster cache, so every controller does not watch Clusters for itself.
    fn wake_on_pause_change<K: Watched>(&self, controller: Controller<K>) -> Controller<K> {
        let store = controller.store();
        let clusters = self.ctx.clusters();
        // What each Cluster's `paused` was when last seen: those cached already, then each
        // change from the subscription on. A Cluster seen for the first time changed nothing
        // (its objects are woken by their own events; at a fleet's scale, going through every
        // object of every controller for each new Cluster made bring-up quadratic).
        let changes = clusters.changes();
        let cached = clusters.store();
        // Paused by the user, and claimed elsewhere: a change of either wakes (the in-memory
        // provider minds the first only).
        let management = self.ctx.management_uid().to_string();
        let is_paused = move |c: &crate::api::Cluster| {
            (
                c.spec.paused == Some(true),
                super::common::claimed_elsewhere(c, &management).is_some(),
            )
        };
        let mut paused: std::collections::HashMap<(Option<String>, String), (bool, bool)> = cached
            .state()
            .iter()
            .map(|c| ((c.namespace(), c.name_any()), is_paused(c)))
            .collect();
        let objects_of_resumed_or_paused = changes
            .filter(move |c| {
                let key = (c.namespace(), c.name_any());
                // A deleted Cluster's last state comes through too, once the cache has let it
                // go: it is forgotten, not kept for the life of the manager.
                if cached.get(&ObjectRef::from_obj(c.as_ref())).is_none() {
                    paused.remove(&key);
                    return ready(false);
                }
                let now = is_paused(c);
                let before = paused.insert(key, now);
                ready(before.is_some_and(|before| before != now))
            })
            .flat_map(move |cluster| {
                let (namespace, name) = (cluster.namespace(), cluster.name_any());
                let objects: Vec<ObjectRef<K>> = store
                    .state()
                    .into_iter()
                    .filter(|o| {
                        o.namespace() == namespace
                            && o.labels().get(crate::api::CLUSTER_NAME_LABEL) == Some(&name)
                    })
                    .map(|o| ObjectRef::from_obj(o.as_ref()))
                    .collect();
                futures::stream::iter(objects)
            });
        controller.reconcile_on(objects_of_resumed_or_paused)
    }

    /// Runs a controller of Cluster API's kinds until the manager stops: bounded concurrency,
    /// a reconcile that succeeds clears the object's failure backoff, failures go through the
    /// shared error policy.
    pub fn run<K, F, Fut>(
        &self,
        name: &'static str,
        controller: Controller<K>,
        reconcile: F,
    ) -> BoxFuture<'static, ()>
    where
        K: Watched,
        F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<controller::Action, super::Error>> + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        self.ctx.metrics.set_max_concurrent(name, self.concurrency);
        let stream = self.limited(controller).run(
            move |o, c| {
                let reconcile = reconcile.clone();
                async move { tracked(name, o, c, |o, c| reconcile(o, c)).await }
            },
            move |o, e, c: Arc<Context>| {
                failed(&c, name, o.as_ref(), e);
                error_policy(o, e, c)
            },
            self.ctx.clone(),
        );
        drive(name, stream).boxed()
    }

    /// Runs a controller of a provider with a context of its own (the in-memory provider).
    pub fn run_with<K, C, F, Fut>(
        &self,
        name: &'static str,
        controller: Controller<K>,
        reconcile: F,
        ctx: Arc<C>,
    ) -> BoxFuture<'static, ()>
    where
        K: Watched,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<controller::Action, super::Error>> + Send + 'static,
    {
        let metrics = self.ctx.metrics.clone();
        metrics.set_max_concurrent(name, self.concurrency);
        let shared = self.ctx.clone();
        let reconcile = Arc::new(reconcile);
        let stream = self.limited(controller).run(
            move |o, c| {
                let (reconcile, metrics) = (reconcile.clone(), metrics.clone());
                async move { measured(&metrics, name, o, |o| reconcile(o, c)).await }
            },
            move |o, e, c| {
                failed(&shared, name, o.as_ref(), e);
                provider_error_policy(o, e, c)
            },
            ctx,
        );
        drive(name, stream).boxed()
    }
}

impl Wiring {
    /// A controller keeping the `status.capacity` of a provider's machine templates (of kind
    /// `K`) at what `capacity` says their machines have (None: not this back end's template).
    pub fn template_capacity<K, C, F, Fut>(
        &self,
        name: &'static str,
        ctx: Arc<C>,
        capacity: F,
    ) -> BoxFuture<'static, ()>
    where
        K: Watched + Resource<Scope = k8s_openapi::NamespaceResourceScope> + serde::Serialize,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<
                Output = Result<Option<std::collections::BTreeMap<String, String>>, super::Error>,
            > + Send
            + 'static,
    {
        let client = self.client.clone();
        let capacity = Arc::new(capacity);
        let controller = self.controller::<K>(name);
        self.run_with(
            name,
            controller,
            move |template: Arc<K>, ctx: Arc<C>| {
                let (client, capacity) = (client.clone(), capacity.clone());
                async move {
                    if let Some(capacity) = capacity(template.clone(), ctx).await? {
                        let namespace = template.meta().namespace.clone().unwrap_or_default();
                        let api: Api<K> = Api::namespaced(client, &namespace);
                        super::common::record_template_capacity(&api, &template, &capacity).await?;
                    }
                    Ok(controller::Action::await_change())
                }
            },
            ctx,
        )
    }
}

/// Drives one controller's stream, logging what failed.
async fn drive<K, S>(name: &'static str, stream: S)
where
    K: Resource,
    S: futures::Stream<
            Item = Result<
                (ObjectRef<K>, kube::runtime::controller::Action),
                controller::Error<super::Error, watcher::Error>,
            >,
        >,
{
    stream
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(controller = name, error = %e, "reconcile error");
            }
        })
        .await;
}

/// What a failed reconcile leaves behind besides its retry: a count and a Warning Event.
fn failed<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    name: &'static str,
    object: &K,
    error: &super::Error,
) {
    ctx.metrics.retried(name);
    let note = error.to_string();
    ctx.events
        .publish(name, object, Severity::Warning, "ReconcileError", note);
}

/// Runs a reconcile and clears the object's failure backoff when it succeeds.
async fn tracked<K, F, Fut>(
    name: &'static str,
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<controller::Action, super::Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<controller::Action, super::Error>>,
{
    let key = super::object_key(object.as_ref());
    let metrics = ctx.metrics.clone();
    let result = measured(&metrics, name, object, |o| reconcile(o, ctx.clone())).await;
    if result.is_ok() {
        ctx.backoff.succeeded(&key);
    }
    result
}

/// Runs a reconcile, recording it in the controller's series.
async fn measured<K, F, Fut>(
    metrics: &ControllerMetrics,
    name: &'static str,
    object: Arc<K>,
    reconcile: F,
) -> Result<controller::Action, super::Error>
where
    K: Resource,
    F: FnOnce(Arc<K>) -> Fut,
    Fut: Future<Output = Result<controller::Action, super::Error>>,
{
    let running = metrics.reconcile_started(name, &queue_key(object.meta()));
    let result = reconcile(object).await;
    running.finished(match &result {
        Err(_) => Outcome::Error,
        Ok(action) if *action == controller::Action::await_change() => Outcome::Success,
        Ok(_) => Outcome::RequeueAfter,
    });
    result
}

/// The controllers (owners with controller: true) of kind `P` of the changed objects, to wake.
pub fn controllers_of<P, K>(
    changes: impl futures::Stream<Item = Arc<K>> + Send + 'static,
) -> impl futures::Stream<Item = ObjectRef<P>> + Send + 'static
where
    P: Resource<DynamicType = ()> + 'static,
    K: Resource + Send + Sync + 'static,
{
    changes.filter_map(|o| {
        let owner = super::common::controller_of(o.owner_references())
            .filter(|r| r.kind == P::kind(&()))
            .map(|r| {
                ObjectRef::new(&r.name).within(o.meta().namespace.as_deref().unwrap_or_default())
            });
        ready(owner)
    })
}

/// The Cluster an object belongs to, to wake.
pub fn cluster_of<K: Resource>(object: &K, cluster: &str) -> Option<ObjectRef<Cluster>> {
    Some(ObjectRef::new(cluster).within(object.meta().namespace.as_deref().unwrap_or_default()))
}

/// The infrastructure machine (of kind `K`) a Machine refers to, to wake: what an
/// infrastructure provider's machine reconciler watches Machines for.
pub fn infrastructure_machine_of<K: Resource<DynamicType = ()>>(
    machine: crate::api::Machine,
) -> Option<ObjectRef<K>> {
    let r = &machine.spec.infrastructure_ref;
    (r.kind == K::kind(&())).then(|| {
        ObjectRef::new(&r.name).within(machine.meta().namespace.as_deref().unwrap_or_default())
    })
}

/// Failures of a provider's own controllers are retried shortly; the message is in the log.
fn provider_error_policy<K: Resource<DynamicType = ()>, C>(
    object: Arc<K>,
    error: &super::Error,
    _: Arc<C>,
) -> kube::runtime::controller::Action {
    tracing::warn!(kind = %K::kind(&()), name = %object.name_any(), %error, "reconcile failed");
    kube::runtime::controller::Action::requeue(Duration::from_secs(2))
}

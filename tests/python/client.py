"""The Python kubernetes client against the embedded management cluster.

Run by tests/apiserver_python.rs with KUBECONFIG pointing at a fresh cluster; prints one line per
check and exits non-zero on the first failure.
"""
import threading

from kubernetes import client, config, watch

config.load_kube_config()
core = client.CoreV1Api()

names = sorted(ns.metadata.name for ns in core.list_namespace().items)
assert names == ["default", "kube-node-lease", "kube-public", "kube-system"], names
print("list namespaces: ok")

seen = []
# The watch starts from this point, however late its thread gets to connect.
start = core.list_namespaced_config_map("default").metadata.resource_version


def watch_config_maps():
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name, event["object"].data))
        if event["type"] == "DELETED":
            w.stop()


watcher = threading.Thread(target=watch_config_maps)
watcher.start()

body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings", labels={"app": "web"}), data={"mode": "fast"})
created = core.create_namespaced_config_map("default", body)
assert created.metadata.resource_version, created
print("create: ok")

patched = core.patch_namespaced_config_map("settings", "default", {"data": {"mode": "slow"}})
assert patched.data == {"mode": "slow"}, patched.data
print("patch: ok")

found = core.list_namespaced_config_map("default", label_selector="app=web").items
assert [c.metadata.name for c in found] == ["settings"], found
print("label selector: ok")

try:
    core.create_namespaced_config_map("default", body)
    raise AssertionError("a second create succeeded")
except client.exceptions.ApiException as e:
    assert e.status == 409, e.status
print("conflict: ok")

core.delete_namespaced_config_map("settings", "default")
watcher.join(timeout=15)
types = [t for t, _, _ in seen]
assert types == ["ADDED", "MODIFIED", "DELETED"], seen
assert seen[1][2] == {"mode": "slow"}, seen
print("watch: ok")

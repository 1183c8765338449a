//! RBAC escalation prevention, as kube-apiserver's: the three ways round RBAC that used to
//! work, each refused with kube-apiserver's message, and the ways that are meant to work.

use std::time::Duration;

use super::common::management::{Management, text};
use super::{kubectl_as, kubectl_as_in, refused_with, user_with_cluster_rules};

const NOT_HELD: &str = "is attempting to grant RBAC permissions not currently held";

#[test]
fn binding_oneself_to_cluster_admin_is_refused() {
    let m = Management::up();
    let alice = user_with_cluster_rules(
        &m,
        "alice",
        r#"[{apiGroups: [rbac.authorization.k8s.io], resources: [clusterrolebindings], verbs: [create]}]"#,
    );
    let out = kubectl_as(
        &m,
        &alice,
        &[
            "create",
            "clusterrolebinding",
            "alice-admin",
            "--clusterrole=cluster-admin",
            "--user=alice",
        ],
    );
    refused_with(
        &out,
        "clusterrolebindings.rbac.authorization.k8s.io \"alice-admin\" is forbidden: user \"alice\"",
    );
    refused_with(&out, NOT_HELD);
    let secrets = kubectl_as(&m, &alice, &["-n", "kube-system", "get", "secrets"]);
    refused_with(&secrets, "cannot list resource \"secrets\"");
    assert!(
        !m.kubectl(&["get", "clusterrolebindings", "-o", "name"])
            .contains("alice-admin"),
        "nothing was stored"
    );

    // With `bind` on exactly the view role, binding it is allowed, and binding another is not.
    let bob = user_with_cluster_rules(
        &m,
        "bob",
        r#"[{apiGroups: [rbac.authorization.k8s.io], resources: [clusterrolebindings], verbs: [create]},
           {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [bind], resourceNames: [view]}]"#,
    );
    let view = kubectl_as(
        &m,
        &bob,
        &[
            "create",
            "clusterrolebinding",
            "carol-view",
            "--clusterrole=view",
            "--user=carol",
        ],
    );
    assert!(view.status.success(), "{}", text(&view.stderr));
    let edit = kubectl_as(
        &m,
        &bob,
        &[
            "create",
            "clusterrolebinding",
            "carol-edit",
            "--clusterrole=edit",
            "--user=carol",
        ],
    );
    refused_with(&edit, NOT_HELD);
}

#[test]
fn a_namespace_role_with_more_than_its_writer_holds_is_refused() {
    let m = Management::up();
    m.kubectl(&["create", "namespace", "team"]);
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "role",
        "role-writer",
        "--verb=create,get,list",
        "--resource=roles,rolebindings,configmaps",
    ]);
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "dana",
        "--role=role-writer",
        "--user=dana",
    ]);
    let dana = super::common::management::kubeconfig_of(&m, "dana", &[]);

    let all = kubectl_as(
        &m,
        &dana,
        &[
            "-n",
            "team",
            "create",
            "role",
            "everything",
            "--verb=*",
            "--resource=*.*",
        ],
    );
    refused_with(
        &all,
        "roles.rbac.authorization.k8s.io \"everything\" is forbidden: user \"dana\"",
    );
    refused_with(&all, NOT_HELD);
    // A role within what she holds is hers to make, and to bind.
    let cm = kubectl_as(
        &m,
        &dana,
        &[
            "-n",
            "team",
            "create",
            "role",
            "cm-reader",
            "--verb=get",
            "--resource=configmaps",
        ],
    );
    assert!(cm.status.success(), "{}", text(&cm.stderr));
    let bound = kubectl_as(
        &m,
        &dana,
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "erin",
            "--role=cm-reader",
            "--user=erin",
        ],
    );
    assert!(bound.status.success(), "{}", text(&bound.stderr));
    // Binding the admin ClusterRole in her namespace grants what she does not hold.
    let admin = kubectl_as(
        &m,
        &dana,
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "dana-admin",
            "--clusterrole=admin",
            "--user=dana",
        ],
    );
    refused_with(&admin, NOT_HELD);
    // With `escalate` on roles she may write any role.
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "role",
        "escalator",
        "--verb=escalate",
        "--resource=roles",
    ]);
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "dana-escalate",
        "--role=escalator",
        "--user=dana",
    ]);
    let all = kubectl_as(
        &m,
        &dana,
        &[
            "-n",
            "team",
            "create",
            "role",
            "everything",
            "--verb=*",
            "--resource=*.*",
        ],
    );
    assert!(all.status.success(), "{}", text(&all.stderr));
}

#[test]
fn joining_the_view_role_by_its_label_needs_what_it_grants() {
    let m = Management::up();
    let frank = user_with_cluster_rules(
        &m,
        "frank",
        r#"[{apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [create, update, patch, get]}]"#,
    );
    let labelled = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: secrets-for-all\n  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\nrules: [{apiGroups: [\"\"], resources: [secrets], verbs: [get, list]}]\n";
    let out = kubectl_as_in(&m, &frank, &["create", "-f", "-"], Some(labelled));
    refused_with(
        &out,
        "clusterroles.rbac.authorization.k8s.io \"secrets-for-all\" is forbidden",
    );
    refused_with(
        &out,
        "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}",
    );
    // An aggregation rule of his own gathers anything: it needs every permission.
    let gather = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: gather\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {rbac.authorization.k8s.io/aggregate-to-admin: \"true\"}}]\nrules: []\n";
    let out = kubectl_as_in(&m, &frank, &["create", "-f", "-"], Some(gather));
    refused_with(
        &out,
        "must have cluster-admin privileges to use the aggregationRule",
    );
    // Relabelling a role that grants Secrets (made by the administrator) is refused too.
    m.kubectl_in(
        &["create", "-f", "-"],
        Some(&labelled.replace(
            "  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\n",
            "",
        )),
    );
    let out = kubectl_as(
        &m,
        &frank,
        &[
            "label",
            "clusterrole",
            "secrets-for-all",
            "rbac.authorization.k8s.io/aggregate-to-view=true",
        ],
    );
    refused_with(&out, NOT_HELD);
    // The view role never gained Secrets.
    std::thread::sleep(Duration::from_secs(3));
    let view = m.kubectl(&["get", "clusterrole", "view", "-o", "json"]);
    assert!(!view.contains("\"secrets\""), "view gained Secrets: {view}");
    let can = m.kubectl_output(
        &[
            "auth",
            "can-i",
            "--as=nobody",
            "--as-group=viewers",
            "get",
            "secrets",
        ],
        None,
    );
    assert_eq!(text(&can.stdout).trim(), "no");
}

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_capictl_global_optspecs
    string join \n v/verbose h/help V/version
end

function __fish_capictl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_capictl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_capictl_using_subcommand
    set -l cmd (__fish_capictl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c capictl -n "__fish_capictl_needs_command" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_needs_command" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_needs_command" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "quickstart" -d 'Create the quick-start cluster in one go: management cluster, providers, node images, the cluster, progress until Available, its tree and kubeconfig'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "init" -d 'Install Cluster API providers into a management cluster (the embedded one by default)'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "generate" -d 'Print YAML: cluster templates, provider components, CRDs'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "describe" -d 'Show a cluster\'s objects and their conditions as a tree'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "get" -d 'Get things out of the management cluster, e.g. a workload cluster\'s kubeconfig'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "move" -d 'Move Clusters and their objects to another management cluster, or save them to a directory and restore them from it'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "convert" -d 'Convert Cluster API YAML between v1beta1 and v1beta2, as the management cluster does'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "topology" -d 'Managed topologies: what the topology controller will do for Clusters with `spec.topology`'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "upgrade" -d 'Plan and apply provider upgrades'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "images" -d 'Build the Docker provider\'s node and load-balancer images from Debian packages'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "alpha" -d 'Commands that may change: `alpha rollout restart|pause|resume|undo`, as clusterctl\'s'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "delete" -d 'Remove providers from the management cluster, or a workload Cluster (`delete cluster NAME`)'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "management" -d 'Run the embedded management cluster: up, serve, down, status, backup, restore'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "manager" -d 'Run the controllers of the providers installed in a management cluster'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "version" -d 'Print the version, git commit, build date and Cluster API contract'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "completion" -d 'Print a shell completion script (bash, zsh or fish)'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "config" -d 'What capictl is configured with: `config repositories` lists the providers it can install'
complete -c capictl -n "__fish_capictl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -s i -l infrastructure -d 'docker or in-memory [default: docker when a Docker Engine answers, else in-memory]' -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l kubernetes-version -d 'The Kubernetes version of the cluster' -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l control-plane-machine-count -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l worker-machine-count -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -s n -l namespace -d 'The namespace of the cluster\'s objects' -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l write-kubeconfig -d 'Where to write the workload cluster\'s kubeconfig (mode 0600) [default: ./NAME.kubeconfig]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l timeout -d 'How long to wait for the cluster to be Available' -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -l self-hosted -d 'Then install the providers into the cluster as Pods and move the cluster into itself, so that it manages itself (Docker, with at least one worker for the controllers\' Pods)'
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand quickstart" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -l core -d 'The core provider [default: cluster-api on the first run]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s b -l bootstrap -d 'Bootstrap providers [default: kubeadm on the first run]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s c -l control-plane -d 'Control plane providers [default: kubeadm on the first run]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s i -l infrastructure -d 'Infrastructure providers: docker, in-memory' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s n -l target-namespace -d 'One namespace for every provider installed by this run [default: each provider\'s own]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -l image -d 'The image the providers\' controller Deployments run' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -l wait-provider-timeout -d 'How long --wait-providers waits for each provider' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s y -l yes -d 'Start the embedded management cluster if none is reachable, without asking'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -l wait-providers -d 'Wait until the providers this run installs or upgrades are ready: their CRDs served and, on a real cluster, their controller Deployments available'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -f -a "list-images" -d 'The images the providers\' components run, one per line: what a registry must hold for a management cluster that cannot reach them otherwise'
complete -c capictl -n "__fish_capictl_using_subcommand init; and not __fish_seen_subcommand_from list-images help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -l core -d 'The core provider [default: cluster-api on the first run]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -s b -l bootstrap -d 'Bootstrap providers [default: kubeadm on the first run]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -s c -l control-plane -d 'Control plane providers [default: kubeadm on the first run]' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -s i -l infrastructure -d 'Infrastructure providers: docker, in-memory' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -l image -d 'The image the providers\' controller Deployments run' -r
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from list-images" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from help" -f -a "list-images" -d 'The images the providers\' components run, one per line: what a registry must hold for a management cluster that cannot reach them otherwise'
complete -c capictl -n "__fish_capictl_using_subcommand init; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -f -a "crds" -d 'The CustomResourceDefinitions of one or more providers, ready for `kubectl apply -f -`'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -f -a "cluster" -d 'A workload cluster\'s objects from a flavor template (or any clusterctl template)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -f -a "provider" -d 'A provider\'s components, as `init` would install them'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -f -a "yaml" -d 'Any YAML with its `${VARIABLES}` filled in from the environment and the clusterctl configuration file, as templates are'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and not __fish_seen_subcommand_from crds cluster provider yaml help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from crds" -l provider -d 'Which provider\'s CRDs; repeat or separate with commas' -r -f -a "core\t''
kubeadm-bootstrap\t''
kubeadm-control-plane\t''
docker\t''
in-memory\t''
clusterctl\t''
all\t''"
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from crds" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from crds" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from crds" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -s f -l flavor -d 'The flavor: `cluster-template-<flavor>.yaml` of the provider' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -s i -l infrastructure -d 'The infrastructure provider whose templates to use: docker or in-memory[:version]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l kubernetes-version -d '`${KUBERNETES_VERSION}`, e.g. v1.30.4' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l control-plane-machine-count -d '`${CONTROL_PLANE_MACHINE_COUNT}` [default: from the environment, else 1]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l worker-machine-count -d '`${WORKER_MACHINE_COUNT}` [default: from the environment, else 0]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -s n -l target-namespace -d 'The namespace of the objects (`${NAMESPACE}`) [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l from -d 'A template file to use instead of a flavor (`-` reads stdin)' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l from-config-map -d 'A ConfigMap of the management cluster holding the template' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l from-config-map-namespace -d 'The ConfigMap\'s namespace [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l from-config-map-key -d 'The ConfigMap\'s key holding the template' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l write-to -d 'Write to this file (mode 0600) instead of stdout' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l config -d 'The clusterctl configuration file with variable values [default: $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml, else ~/.cluster-api/clusterctl.yaml]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -l list-variables -d 'List the template\'s variables instead of rendering it'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from cluster" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -l core -d 'The core provider: cluster-api' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s b -l bootstrap -d 'A bootstrap provider: kubeadm' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s c -l control-plane -d 'A control plane provider: kubeadm' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s i -l infrastructure -d 'An infrastructure provider: docker, in-memory' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s n -l target-namespace -d 'The namespace to install into [default: the provider\'s own]' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -l image -d 'The image the controller Deployment runs' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from provider" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from yaml" -l from -d 'The YAML file (`-` reads stdin)' -r
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from yaml" -l config -d 'The clusterctl configuration file with variable values [default: $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml, else ~/.cluster-api/clusterctl.yaml]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from yaml" -l list-variables -d 'List the variables the YAML names instead of rendering it'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from yaml" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from yaml" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from yaml" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "crds" -d 'The CustomResourceDefinitions of one or more providers, ready for `kubectl apply -f -`'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "cluster" -d 'A workload cluster\'s objects from a flavor template (or any clusterctl template)'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "provider" -d 'A provider\'s components, as `init` would install them'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "yaml" -d 'Any YAML with its `${VARIABLES}` filled in from the environment and the clusterctl configuration file, as templates are'
complete -c capictl -n "__fish_capictl_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and not __fish_seen_subcommand_from cluster help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and not __fish_seen_subcommand_from cluster help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and not __fish_seen_subcommand_from cluster help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and not __fish_seen_subcommand_from cluster help" -f -a "cluster" -d 'The tree of a Cluster\'s objects with their conditions'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and not __fish_seen_subcommand_from cluster help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -s n -l namespace -d 'The namespace of the Cluster [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l show-conditions -d 'A row per condition for these objects: all, KIND or KIND/NAME, comma-separated; a `+` suffix keeps only the conditions that say something' -r
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -s c -l color -d 'Colour the output; `-c` alone is `--color=true`, and `--color=false` turns it off, as clusterctl\'s flag [default: when stdout is a terminal and NO_COLOR is unset]' -r -f -a "true\t''
false\t''"
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -s o -l output -d 'The output: the tree as text, or the same tree as JSON or YAML' -r -f -a "tree\t''
json\t''
yaml\t''"
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l grouping -d 'Fold sibling Machines in the same state into one row' -r -f -a "true\t''
false\t''"
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l show-machinesets -d 'Show the MachineSets between MachineDeployments and their Machines'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l show-resourcesets -d 'Show the ClusterResourceSets applied to the Cluster (its ClusterResourceSetBinding\'s)'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l show-templates -d 'Show the templates the control plane and the MachineDeployments make Machines from'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -l echo -d 'Always show Machines\' infrastructure machines and bootstrap configs'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from cluster" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from help" -f -a "cluster" -d 'The tree of a Cluster\'s objects with their conditions'
complete -c capictl -n "__fish_capictl_using_subcommand describe; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand get; and not __fish_seen_subcommand_from kubeconfig help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand get; and not __fish_seen_subcommand_from kubeconfig help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand get; and not __fish_seen_subcommand_from kubeconfig help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand get; and not __fish_seen_subcommand_from kubeconfig help" -f -a "kubeconfig" -d 'A workload cluster\'s kubeconfig, from its `<cluster>-kubeconfig` Secret'
complete -c capictl -n "__fish_capictl_using_subcommand get; and not __fish_seen_subcommand_from kubeconfig help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -s n -l namespace -d 'The namespace of the Cluster [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -l write-to -d 'Write to this file (mode 0600) instead of stdout' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from kubeconfig" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from help" -f -a "kubeconfig" -d 'A workload cluster\'s kubeconfig, from its `<cluster>-kubeconfig` Secret'
complete -c capictl -n "__fish_capictl_using_subcommand get; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand move" -l to-kubeconfig -d 'The target management cluster\'s kubeconfig' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand move" -l to-kubeconfig-context -d 'The context of --to-kubeconfig to use [default: its current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand move" -l to-directory -d 'Save the objects to this directory (one YAML file each) and leave the source running' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand move" -l from-directory -d 'Restore objects saved with --to-directory into the management cluster --kubeconfig names' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand move" -s n -l namespace -d 'The namespace of the Clusters to move [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand move" -l cluster -d 'Move only these Clusters and what belongs to them [default: every Cluster in the namespace]' -r
complete -c capictl -n "__fish_capictl_using_subcommand move" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand move" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand move" -l take-over -d 'Make the management cluster --kubeconfig names the one that reconciles these Clusters, taking their workload clusters from the management cluster that claims them now (one gone for good, or that must stop: it leaves them alone from then on)'
complete -c capictl -n "__fish_capictl_using_subcommand move" -l dry-run -d 'Print what would move and check the target, changing nothing anywhere'
complete -c capictl -n "__fish_capictl_using_subcommand move" -l force -d 'Move even when some objects cannot be (an owner of theirs does not move): they stay in the source'
complete -c capictl -n "__fish_capictl_using_subcommand move" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand move" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand move" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand convert" -s f -l filename -d 'The YAML to convert (several documents are fine); `-` reads stdin' -r
complete -c capictl -n "__fish_capictl_using_subcommand convert" -l to -d 'The API version to convert Cluster API objects to; other objects pass through as they are' -r -f -a "v1beta1\t''
v1beta2\t''"
complete -c capictl -n "__fish_capictl_using_subcommand convert" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand convert" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand convert" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and not __fish_seen_subcommand_from plan help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and not __fish_seen_subcommand_from plan help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and not __fish_seen_subcommand_from plan help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and not __fish_seen_subcommand_from plan help" -f -a "plan" -d 'Show what the topology controller would create, change and delete for the Clusters in FILEs (with diffs), checked by the management cluster without writing anything'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and not __fish_seen_subcommand_from plan help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s f -l file -d 'Files with Clusters (and anything else); `-` reads stdin' -r
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s c -l cluster -d 'Only this Cluster of the files' -r
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s n -l namespace -d 'The namespace of objects that name none [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s o -l output-directory -d 'Also write each created and modified object (before and after) under this directory' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from plan" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from help" -f -a "plan" -d 'Show what the topology controller would create, change and delete for the Clusters in FILEs (with diffs), checked by the management cluster without writing anything'
complete -c capictl -n "__fish_capictl_using_subcommand topology; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and not __fish_seen_subcommand_from plan apply help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and not __fish_seen_subcommand_from plan apply help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and not __fish_seen_subcommand_from plan apply help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and not __fish_seen_subcommand_from plan apply help" -f -a "plan" -d 'Which provider versions the management cluster can move to, and where each workload cluster\'s Kubernetes version can go next'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and not __fish_seen_subcommand_from plan apply help" -f -a "apply" -d 'Upgrade the providers to the versions this capictl carries'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and not __fish_seen_subcommand_from plan apply help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from plan" -s o -l output -d 'Output format' -r -f -a "text\t''
json\t''
yaml\t''"
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from plan" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from plan" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from plan" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from plan" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from plan" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l contract -d 'Upgrade every provider to the newest version of this contract' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l core -d 'The core provider to upgrade, as NAME:VERSION' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -s b -l bootstrap -d 'Bootstrap providers to upgrade, as NAME:VERSION' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -s c -l control-plane -d 'Control plane providers to upgrade, as NAME:VERSION' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -s i -l infrastructure -d 'Infrastructure providers to upgrade, as NAME:VERSION' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l image -d 'The image the upgraded controller Deployments run' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l wait-provider-timeout -d 'How long --wait-providers waits for each provider' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -l wait-providers -d 'Wait until the providers this run installs or upgrades are ready: their CRDs served and, on a real cluster, their controller Deployments available'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from apply" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from help" -f -a "plan" -d 'Which provider versions the management cluster can move to, and where each workload cluster\'s Kubernetes version can go next'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from help" -f -a "apply" -d 'Upgrade the providers to the versions this capictl carries'
complete -c capictl -n "__fish_capictl_using_subcommand upgrade; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand images; and not __fish_seen_subcommand_from build help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand images; and not __fish_seen_subcommand_from build help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand images; and not __fish_seen_subcommand_from build help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand images; and not __fish_seen_subcommand_from build help" -f -a "build" -d 'Build the load-balancer image, a node image per Kubernetes version, the controller image (capictl:v<version>, what init\'s Deployments run) and capictl/busybox (to try workloads offline); what exists and is up to date is kept'
complete -c capictl -n "__fish_capictl_using_subcommand images; and not __fish_seen_subcommand_from build help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from build" -l kubernetes-version -d 'The Kubernetes versions to build node images for' -r
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from build" -l mirror -d 'The Debian mirror to debootstrap from [default: the one this host\'s apt sources name]' -r
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from build" -l force -d 'Rebuild everything, the Debian root filesystem included'
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from build" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from build" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from build" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from help" -f -a "build" -d 'Build the load-balancer image, a node image per Kubernetes version, the controller image (capictl:v<version>, what init\'s Deployments run) and capictl/busybox (to try workloads offline); what exists and is up to date is kept'
complete -c capictl -n "__fish_capictl_using_subcommand images; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and not __fish_seen_subcommand_from rollout help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and not __fish_seen_subcommand_from rollout help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and not __fish_seen_subcommand_from rollout help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and not __fish_seen_subcommand_from rollout help" -f -a "rollout" -d 'Manage the rollout of a MachineDeployment or KubeadmControlPlane'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and not __fish_seen_subcommand_from rollout help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -f -a "restart" -d 'Replace every Machine: sets `spec.rollout.after` to now'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -f -a "pause" -d 'Stop rolling out: the MachineDeployment\'s `spec.paused`, the control plane\'s `cluster.x-k8s.io/paused` annotation'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -f -a "resume" -d 'Roll out again after a pause'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -f -a "undo" -d 'Go back to an earlier template of a MachineDeployment (the previous one by default)'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from rollout" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from help" -f -a "rollout" -d 'Manage the rollout of a MachineDeployment or KubeadmControlPlane'
complete -c capictl -n "__fish_capictl_using_subcommand alpha; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -l core -d 'The core provider: cluster-api' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -s b -l bootstrap -d 'Bootstrap providers' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -s c -l control-plane -d 'Control plane providers' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -s i -l infrastructure -d 'Infrastructure providers' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -l all -d 'Every installed provider'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -l include-crd -d 'Also delete the providers\' CRDs (refused while objects of them exist)'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -l include-namespace -d 'Also delete the providers\' namespaces'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -f -a "cluster" -d 'Delete a workload Cluster and everything it made (Machines, their infrastructure, the control plane), after showing what will go and asking'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and not __fish_seen_subcommand_from cluster help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -s n -l namespace -d 'The namespace of the Cluster [default: the kubeconfig context\'s, else default]' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -l timeout -d 'How long to wait for the Cluster to be gone' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -s y -l yes -d 'Delete without asking (for scripts; without a terminal nothing is deleted otherwise)'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -l no-wait -d 'Return once the deletion is asked for instead of when the Cluster is gone'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from cluster" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from help" -f -a "cluster" -d 'Delete a workload Cluster and everything it made (Machines, their infrastructure, the control plane), after showing what will go and asking'
complete -c capictl -n "__fish_capictl_using_subcommand delete; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "up" -d 'Start the management cluster in the background and point a kubeconfig context at it'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "serve" -d 'Run the management cluster in the foreground (what `up` starts)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "down" -d 'Stop the management cluster'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "status" -d 'Say whether the management cluster runs, where, since when, and what it holds'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "backup" -d 'Save every object as of one revision, and the CA, to a file (0600), while the management cluster runs or after it stopped'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "restore" -d 'Make a new state directory the management cluster saved in a backup; then start it with `capictl management up --dir DIR`'
complete -c capictl -n "__fish_capictl_using_subcommand management; and not __fish_seen_subcommand_from up serve down status backup restore help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l dir -d 'The state directory [default: $XDG_DATA_HOME/capictl/management]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l listen -d 'Address to listen on; port 0 reuses this directory\'s last port, else picks a free one' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l kubeconfig -d 'The kubeconfig to add a context to [default: $KUBECONFIG, else ~/.kube/config]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l context -d 'The name of the kubeconfig context (and cluster and user) to write' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l tls-san -d 'More names or addresses the serving certificate carries, for clients that reach the server by them: a load balancer in front of several servers, a DNS name, this host\'s address when listening on 0.0.0.0' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l etcd-endpoints -d 'Keep objects in etcd (comma-separated client URLs) instead of the embedded store' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l etcd-cafile -d 'The CA that etcd\'s serving certificates chain to (etcd over TLS)' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l etcd-certfile -d 'The client certificate to present to etcd' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l etcd-keyfile -d 'The client certificate\'s private key' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l audit-policy-file -d 'The audit policy (an audit.k8s.io/v1 Policy) [default: every request at Metadata]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l audit-log-path -d 'Where the audit log goes; "" for none [default: audit.log in the state directory]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l audit-log-maxsize -d 'Rotate the audit log at this many megabytes' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l audit-log-maxbackup -d 'How many rotated audit logs are kept' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l request-timeout -d 'How long a request may take to send its body (a Go duration: 30s, 1m)' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l watch-history-mb -d 'Megabytes of past events kept for watches to resume from, across every resource; a watcher further behind gets 410 Gone and lists again' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l no-kubeconfig -d 'Write no kubeconfig context (the admin kubeconfig in the state directory is always there)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -l autoscaler -d 'Run the cluster autoscaler: node groups (MachineDeployments, and MachineSets of their own, with the cluster-api-autoscaler-node-group-min-size and -max-size annotations) grow for Pods no Node fits and shrink by Nodes left empty (docs/autoscaler.md)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from up" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l dir -d 'The state directory [default: $XDG_DATA_HOME/capictl/management]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l listen -d 'Address to listen on; port 0 reuses this directory\'s last port, else picks a free one' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l kubeconfig -d 'The kubeconfig to add a context to [default: $KUBECONFIG, else ~/.kube/config]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l context -d 'The name of the kubeconfig context (and cluster and user) to write' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l tls-san -d 'More names or addresses the serving certificate carries, for clients that reach the server by them: a load balancer in front of several servers, a DNS name, this host\'s address when listening on 0.0.0.0' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l etcd-endpoints -d 'Keep objects in etcd (comma-separated client URLs) instead of the embedded store' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l etcd-cafile -d 'The CA that etcd\'s serving certificates chain to (etcd over TLS)' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l etcd-certfile -d 'The client certificate to present to etcd' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l etcd-keyfile -d 'The client certificate\'s private key' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l audit-policy-file -d 'The audit policy (an audit.k8s.io/v1 Policy) [default: every request at Metadata]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l audit-log-path -d 'Where the audit log goes; "" for none [default: audit.log in the state directory]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l audit-log-maxsize -d 'Rotate the audit log at this many megabytes' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l audit-log-maxbackup -d 'How many rotated audit logs are kept' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l request-timeout -d 'How long a request may take to send its body (a Go duration: 30s, 1m)' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l watch-history-mb -d 'Megabytes of past events kept for watches to resume from, across every resource; a watcher further behind gets 410 Gone and lists again' -r
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l no-kubeconfig -d 'Write no kubeconfig context (the admin kubeconfig in the state directory is always there)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -l autoscaler -d 'Run the cluster autoscaler: node groups (MachineDeployments, and MachineSets of their own, with the cluster-api-autoscaler-node-group-min-size and -max-size annotations) grow for Pods no Node fits and shrink by Nodes left empty (docs/autoscaler.md)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from serve" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from down" -l dir -d 'The state directory [default: $XDG_DATA_HOME/capictl/management]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from down" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from down" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from down" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from status" -l dir -d 'The state directory [default: $XDG_DATA_HOME/capictl/management]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from status" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from backup" -l dir -d 'The state directory [default: $XDG_DATA_HOME/capictl/management]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from backup" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from backup" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from backup" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from restore" -l dir -d 'The state directory [default: $XDG_DATA_HOME/capictl/management]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from restore" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from restore" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from restore" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "up" -d 'Start the management cluster in the background and point a kubeconfig context at it'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Run the management cluster in the foreground (what `up` starts)'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "down" -d 'Stop the management cluster'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "status" -d 'Say whether the management cluster runs, where, since when, and what it holds'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "backup" -d 'Save every object as of one revision, and the CA, to a file (0600), while the management cluster runs or after it stopped'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "restore" -d 'Make a new state directory the management cluster saved in a backup; then start it with `capictl management up --dir DIR`'
complete -c capictl -n "__fish_capictl_using_subcommand management; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l kubeconfig -d 'The management cluster\'s kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l kubeconfig-context -d 'The kubeconfig context to use [default: the current one]' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l leader-elect -d 'Elect a leader among managers on a Lease, so that only one reconciles at a time' -r -f -a "true\t''
false\t''"
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l leader-election-namespace -d 'The namespace of the leader election Lease' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l leader-elect-lease-duration -d 'How long the others wait, after the leader last renewed its Lease, before one takes over (a Go duration; a bare number is seconds)' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l leader-elect-renew-deadline -d 'How long the leader keeps trying to renew its Lease before it stops leading; shorter than the lease duration, so that it stops before another may start' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l leader-elect-retry-period -d 'How often candidates try to take the Lease, and the leader to renew it' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l providers -d 'Run only these providers\' controllers (comma-separated labels: cluster-api, bootstrap-kubeadm, control-plane-kubeadm, infrastructure-in-memory) [default: all installed]' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l concurrency -d 'How many objects of one kind are reconciled at once' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l webhook-port -d 'Serve the providers\' admission webhooks on this port (0: do not serve them)' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l webhook-cert-dir -d 'Where the webhook serving certificate is (tls.crt, tls.key)' -r -F
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l kube-api-qps -d 'Average requests per second to the API server' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l kube-api-burst -d 'Requests allowed at once above the average' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l metrics-bind-address -d 'Serve Prometheus metrics on /metrics, and /healthz and /readyz, at this address (e.g. :8080 or 127.0.0.1:8080; 0: do not serve them)' -r
complete -c capictl -n "__fish_capictl_using_subcommand manager" -l autoscaler -d 'Run the cluster autoscaler: node groups (MachineDeployments, and MachineSets of their own, with the cluster-api-autoscaler-node-group-min-size and -max-size annotations) grow for Pods no Node fits and shrink by Nodes left empty (docs/autoscaler.md)'
complete -c capictl -n "__fish_capictl_using_subcommand manager" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand manager" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand manager" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand version" -s o -l output -d 'Output format' -r -f -a "text\t''
short\t''
json\t''
yaml\t''"
complete -c capictl -n "__fish_capictl_using_subcommand version" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand version" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand version" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand completion" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand completion" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand completion" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand config; and not __fish_seen_subcommand_from repositories help" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand config; and not __fish_seen_subcommand_from repositories help" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand config; and not __fish_seen_subcommand_from repositories help" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand config; and not __fish_seen_subcommand_from repositories help" -f -a "repositories" -d 'The providers `init` can install, with where their components come from'
complete -c capictl -n "__fish_capictl_using_subcommand config; and not __fish_seen_subcommand_from repositories help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand config; and __fish_seen_subcommand_from repositories" -s o -l output -d 'text, or yaml' -r -f -a "text\t''
yaml\t''"
complete -c capictl -n "__fish_capictl_using_subcommand config; and __fish_seen_subcommand_from repositories" -s v -l verbose -d 'More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl\'s `-v N` works too: 1-2 info, 3-4 debug, 5 and more trace)'
complete -c capictl -n "__fish_capictl_using_subcommand config; and __fish_seen_subcommand_from repositories" -s h -l help -d 'Print help'
complete -c capictl -n "__fish_capictl_using_subcommand config; and __fish_seen_subcommand_from repositories" -s V -l version -d 'Print version'
complete -c capictl -n "__fish_capictl_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "repositories" -d 'The providers `init` can install, with where their components come from'
complete -c capictl -n "__fish_capictl_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "quickstart" -d 'Create the quick-start cluster in one go: management cluster, providers, node images, the cluster, progress until Available, its tree and kubeconfig'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "init" -d 'Install Cluster API providers into a management cluster (the embedded one by default)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "generate" -d 'Print YAML: cluster templates, provider components, CRDs'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "describe" -d 'Show a cluster\'s objects and their conditions as a tree'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "get" -d 'Get things out of the management cluster, e.g. a workload cluster\'s kubeconfig'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "move" -d 'Move Clusters and their objects to another management cluster, or save them to a directory and restore them from it'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "convert" -d 'Convert Cluster API YAML between v1beta1 and v1beta2, as the management cluster does'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "topology" -d 'Managed topologies: what the topology controller will do for Clusters with `spec.topology`'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "upgrade" -d 'Plan and apply provider upgrades'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "images" -d 'Build the Docker provider\'s node and load-balancer images from Debian packages'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "alpha" -d 'Commands that may change: `alpha rollout restart|pause|resume|undo`, as clusterctl\'s'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "delete" -d 'Remove providers from the management cluster, or a workload Cluster (`delete cluster NAME`)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "management" -d 'Run the embedded management cluster: up, serve, down, status, backup, restore'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "manager" -d 'Run the controllers of the providers installed in a management cluster'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "version" -d 'Print the version, git commit, build date and Cluster API contract'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "completion" -d 'Print a shell completion script (bash, zsh or fish)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "config" -d 'What capictl is configured with: `config repositories` lists the providers it can install'
complete -c capictl -n "__fish_capictl_using_subcommand help; and not __fish_seen_subcommand_from quickstart init generate describe get move convert topology upgrade images alpha delete management manager version completion config help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from init" -f -a "list-images" -d 'The images the providers\' components run, one per line: what a registry must hold for a management cluster that cannot reach them otherwise'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from generate" -f -a "crds" -d 'The CustomResourceDefinitions of one or more providers, ready for `kubectl apply -f -`'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from generate" -f -a "cluster" -d 'A workload cluster\'s objects from a flavor template (or any clusterctl template)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from generate" -f -a "provider" -d 'A provider\'s components, as `init` would install them'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from generate" -f -a "yaml" -d 'Any YAML with its `${VARIABLES}` filled in from the environment and the clusterctl configuration file, as templates are'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from describe" -f -a "cluster" -d 'The tree of a Cluster\'s objects with their conditions'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from get" -f -a "kubeconfig" -d 'A workload cluster\'s kubeconfig, from its `<cluster>-kubeconfig` Secret'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from topology" -f -a "plan" -d 'Show what the topology controller would create, change and delete for the Clusters in FILEs (with diffs), checked by the management cluster without writing anything'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from upgrade" -f -a "plan" -d 'Which provider versions the management cluster can move to, and where each workload cluster\'s Kubernetes version can go next'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from upgrade" -f -a "apply" -d 'Upgrade the providers to the versions this capictl carries'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from images" -f -a "build" -d 'Build the load-balancer image, a node image per Kubernetes version, the controller image (capictl:v<version>, what init\'s Deployments run) and capictl/busybox (to try workloads offline); what exists and is up to date is kept'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from alpha" -f -a "rollout" -d 'Manage the rollout of a MachineDeployment or KubeadmControlPlane'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from delete" -f -a "cluster" -d 'Delete a workload Cluster and everything it made (Machines, their infrastructure, the control plane), after showing what will go and asking'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from management" -f -a "up" -d 'Start the management cluster in the background and point a kubeconfig context at it'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from management" -f -a "serve" -d 'Run the management cluster in the foreground (what `up` starts)'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from management" -f -a "down" -d 'Stop the management cluster'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from management" -f -a "status" -d 'Say whether the management cluster runs, where, since when, and what it holds'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from management" -f -a "backup" -d 'Save every object as of one revision, and the CA, to a file (0600), while the management cluster runs or after it stopped'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from management" -f -a "restore" -d 'Make a new state directory the management cluster saved in a backup; then start it with `capictl management up --dir DIR`'
complete -c capictl -n "__fish_capictl_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "repositories" -d 'The providers `init` can install, with where their components come from'

"""`kubectl sampler`: sampler next to a pod, through kubectl (an ephemeral debug container,
or a node agent's pod), and the manifests it applies."""

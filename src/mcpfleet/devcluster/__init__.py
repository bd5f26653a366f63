"""A real Kubernetes control plane (etcd, apiserver, controllers, scheduler, kwok) built from Go modules."""

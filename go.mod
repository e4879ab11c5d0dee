module github.com/xpu-go/xpu

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-0
	github.com/ebitengine/purego v0.11.3
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/exp v0.0.0-20261014143641-f0251eb4aa3e
	golang.org/x/sync v0.24.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

module github.com/xpu-go/xpu/examples/arena

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/xpu-go/xpu v0.0.0
)

require (
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20261014143641-f0251eb4aa3e // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/xpu-go/xpu => ../..

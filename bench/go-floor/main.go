// The Go floor of bench/serve.ts: a grpc-go server answering every ShouldRateLimit call with one
// constant answer, the RateLimitResponse bytes it is given, and deciding nothing. What it spends per
// call is what a Go service such as envoyproxy/ratelimit spends on gRPC before its decision.
//
// The service is registered by a hand-written descriptor, and messages pass through a codec of raw
// bytes: no generated code, so it builds from Debian's golang-google-grpc-dev alone (GOPATH mode).
//
// Usage: go-floor <answer as hex>; prints the port it listens on (127.0.0.1, a free one).
package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// rawCodec hands a message's bytes over as they are; it takes the name of the default codec, "proto".
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = data
	return nil
}

func (rawCodec) Name() string { return "proto" }

var answer []byte

func shouldRateLimit(_ interface{}, _ context.Context, decode func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error) {
	var request []byte
	if err := decode(&request); err != nil {
		return nil, err
	}
	return &answer, nil
}

var service = grpc.ServiceDesc{
	ServiceName: "envoy.service.ratelimit.v3.RateLimitService",
	HandlerType: (*interface{})(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimit}},
	Metadata:    "ratelimit.proto",
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go-floor <answer as hex>")
		os.Exit(2)
	}
	var err error
	if answer, err = hex.DecodeString(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "go-floor:", err)
		os.Exit(2)
	}
	encoding.RegisterCodec(rawCodec{})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-floor:", err)
		os.Exit(1)
	}
	server := grpc.NewServer()
	server.RegisterService(&service, struct{}{})
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, "go-floor:", err)
		os.Exit(1)
	}
}

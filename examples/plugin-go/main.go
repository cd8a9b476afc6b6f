// Command plugin-go-example is a vk-provider plugin written in Go: pods live in this process's memory
// and run the moment they are created, as with vk-provider's `mock` provider. It declares status push,
// pod addresses and logs, and leaves the other optional operations UNIMPLEMENTED, as the API says.
//
//	plugin-go-example --address unix:///run/vk-provider/plugin.sock [--unhealthy-file PATH]
//
// A node runs against it with `provider: grpc` and `provider_config: {address: ...}`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "vk-provider.invalid/plugin-go-example/pluginv1"
)

const (
	pluginName  = "example-go"
	apiVersion  = "v1"
	logLines    = 10
	followEvery = time.Second
)

type pod struct {
	request *pb.PodRequest
	state   *pb.PodState
}

// provider holds the pods of the one node it serves, and the watchers of their states.
type provider struct {
	pb.UnimplementedProviderServer

	unhealthyFile string

	mu        sync.Mutex
	pods      map[string]*pod // by pod UID
	addresses map[string]string
	next      int
	watchers  map[chan *pb.PodState]struct{}
}

func newProvider(unhealthyFile string) *provider {
	return &provider{
		unhealthyFile: unhealthyFile,
		pods:          map[string]*pod{},
		addresses:     map[string]string{},
		watchers:      map[chan *pb.PodState]struct{}{},
	}
}

func (p *provider) GetPluginInfo(context.Context, *pb.GetPluginInfoRequest) (*pb.PluginInfo, error) {
	return &pb.PluginInfo{
		Name:       pluginName,
		Version:    "0.1.0",
		ApiVersion: apiVersion,
		Capabilities: []pb.Capability{
			pb.Capability_CAPABILITY_STATUS_PUSH,
			pb.Capability_CAPABILITY_POD_ADDRESS,
			pb.Capability_CAPABILITY_LOGS,
		},
	}, nil
}

// addressOf gives each pod UID one address for good, the same before and after it runs. Call with mu held.
func (p *provider) addressOf(uid string) string {
	if address, ok := p.addresses[uid]; ok {
		return address
	}
	p.next++
	address := fmt.Sprintf("10.201.%d.%d", p.next/250, p.next%250+1)
	p.addresses[uid] = address
	return address
}

func validate(request *pb.PodRequest) error {
	if request.GetRef().GetUid() == "" {
		return status.Error(codes.InvalidArgument, "the pod has no uid")
	}
	if len(request.GetContainers()) == 0 {
		return status.Error(codes.InvalidArgument, "the pod has no containers")
	}
	for _, container := range request.GetContainers() {
		if strings.HasPrefix(container.GetImage(), "invalid/") {
			return status.Errorf(codes.InvalidArgument, "image %q is refused by this plugin", container.GetImage())
		}
	}
	return nil
}

func (p *provider) running(request *pb.PodRequest) *pb.PodState {
	now := timestamppb.Now()
	address := p.addressOf(request.GetRef().GetUid())
	state := &pb.PodState{
		Ref:       request.GetRef(),
		Phase:     "Running",
		PodIp:     proto.String(address),
		StartedAt: now,
	}
	for _, container := range request.GetContainers() {
		state.Containers = append(state.Containers, &pb.ContainerState{
			Name:        container.GetName(),
			Image:       container.GetImage(),
			State:       pb.ContainerStateKind_CONTAINER_STATE_KIND_RUNNING,
			Ready:       true,
			Started:     true,
			StartedAt:   now,
			ContainerId: "example-go://" + request.GetRef().GetUid() + "/" + container.GetName(),
		})
		if ports := container.GetPorts(); len(ports) > 0 && state.TrafficAddress == nil {
			state.TrafficAddress = proto.String(fmt.Sprintf("http://%s:%d", address, ports[0].GetContainerPort()))
		}
	}
	return state
}

func (p *provider) CreatePod(_ context.Context, in *pb.CreatePodRequest) (*pb.CreatePodResponse, error) {
	if err := validate(in.GetPod()); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	uid := in.GetPod().GetRef().GetUid()
	if _, exists := p.pods[uid]; !exists { // idempotent per pod UID
		entry := &pod{request: in.GetPod(), state: p.running(in.GetPod())}
		p.pods[uid] = entry
		p.publish(entry.state)
	}
	return &pb.CreatePodResponse{}, nil
}

func (p *provider) UpdatePod(_ context.Context, in *pb.UpdatePodRequest) (*pb.UpdatePodResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	entry, ok := p.pods[in.GetPod().GetRef().GetUid()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no pod %s", in.GetPod().GetRef().GetUid())
	}
	entry.request = in.GetPod()
	return &pb.UpdatePodResponse{}, nil
}

func (p *provider) DeletePod(_ context.Context, in *pb.DeletePodRequest) (*pb.DeletePodResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid := in.GetRef().GetUid()
	if entry, ok := p.pods[uid]; ok { // an unknown UID is no error
		delete(p.pods, uid)
		gone := proto.Clone(entry.state).(*pb.PodState)
		gone.Phase, gone.Terminated = "Succeeded", true
		p.publish(gone)
	}
	return &pb.DeletePodResponse{}, nil
}

func (p *provider) GetPodState(_ context.Context, in *pb.GetPodStateRequest) (*pb.GetPodStateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if entry, ok := p.pods[in.GetRef().GetUid()]; ok {
		return &pb.GetPodStateResponse{State: entry.state}, nil
	}
	return &pb.GetPodStateResponse{}, nil
}

func (p *provider) ListPods(context.Context, *pb.ListPodsRequest) (*pb.ListPodsResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	response := &pb.ListPodsResponse{}
	for _, entry := range p.pods {
		response.Pods = append(response.Pods, entry.state)
	}
	return response, nil
}

func (p *provider) CheckHealth(context.Context, *pb.CheckHealthRequest) (*pb.CheckHealthResponse, error) {
	if p.unhealthyFile != "" {
		if _, err := os.Stat(p.unhealthyFile); err == nil {
			return nil, status.Errorf(codes.Unavailable, "unhealthy: %s exists", p.unhealthyFile)
		}
	}
	return &pb.CheckHealthResponse{}, nil
}

func (p *provider) GetPodAddress(_ context.Context, in *pb.GetPodAddressRequest) (*pb.GetPodAddressResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pb.GetPodAddressResponse{Address: p.addressOf(in.GetRef().GetUid())}, nil
}

// publish sends a state to every watcher; a watcher too slow to keep up misses it (it can poll). Call
// with mu held.
func (p *provider) publish(state *pb.PodState) {
	for watcher := range p.watchers {
		select {
		case watcher <- state:
		default:
		}
	}
}

func (p *provider) WatchPodStates(_ *pb.WatchPodStatesRequest, stream grpc.ServerStreamingServer[pb.PodState]) error {
	states := make(chan *pb.PodState, 256)
	p.mu.Lock()
	// The pods as they are now first, then each change: a watcher that connects late misses nothing.
	for _, entry := range p.pods {
		states <- entry.state
		if len(states) == cap(states) {
			break
		}
	}
	p.watchers[states] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, states)
		p.mu.Unlock()
	}()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case state := <-states:
			if err := stream.Send(state); err != nil {
				return err
			}
		}
	}
}

// StreamLogs serves a synthetic log: logLines numbered lines, then one more each second when following.
func (p *provider) StreamLogs(in *pb.StreamLogsRequest, stream grpc.ServerStreamingServer[pb.LogChunk]) error {
	p.mu.Lock()
	entry, ok := p.pods[in.GetRef().GetUid()]
	p.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "no pod %s", in.GetRef().GetUid())
	}
	known := false
	for _, container := range entry.request.GetContainers() {
		known = known || container.GetName() == in.GetContainer()
	}
	if !known {
		return status.Errorf(codes.NotFound, "pod %s has no container %q", in.GetRef().GetName(), in.GetContainer())
	}
	first := 1
	if in.TailLines != nil && in.GetTailLines() < logLines {
		first = logLines - int(in.GetTailLines()) + 1
	}
	budget := int64(-1)
	if in.LimitBytes != nil {
		budget = in.GetLimitBytes()
	}
	send := func(number int) (bool, error) {
		line := []byte(fmt.Sprintf("line %d of %s\n", number, in.GetContainer()))
		if budget >= 0 && int64(len(line)) > budget {
			line = line[:budget]
		}
		if len(line) > 0 {
			if err := stream.Send(&pb.LogChunk{Data: line}); err != nil {
				return false, err
			}
		}
		if budget >= 0 {
			budget -= int64(len(line))
			if budget == 0 {
				return false, nil
			}
		}
		return true, nil
	}
	for number := first; number <= logLines; number++ {
		if more, err := send(number); !more || err != nil {
			return err
		}
	}
	if !in.GetFollow() {
		return nil
	}
	ticker := time.NewTicker(followEvery)
	defer ticker.Stop()
	for number := logLines + 1; ; number++ {
		select {
		case <-stream.Context().Done():
			return nil
		case <-ticker.C:
			if more, err := send(number); !more || err != nil {
				return err
			}
		}
	}
}

func listen(address string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(address, "unix://"); ok {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return net.Listen("unix", path)
	}
	return net.Listen("tcp", address)
}

func main() {
	address := flag.String("address", "", "where to listen: unix:///path/to/plugin.sock or host:port")
	unhealthyFile := flag.String("unhealthy-file", "", "while this file exists, CheckHealth answers UNAVAILABLE")
	flag.Parse()
	if *address == "" {
		log.Fatal("--address is required")
	}
	listener, err := listen(*address)
	if err != nil {
		log.Fatalf("cannot listen on %s: %v", *address, err)
	}
	server := grpc.NewServer()
	pb.RegisterProviderServer(server, newProvider(*unhealthyFile))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.GracefulStop()
	}()
	log.Printf("plugin %s serves on %s", pluginName, *address)
	if err := server.Serve(listener); err != nil {
		log.Fatalf("serving: %v", err)
	}
}

// ns-3's side of bench/sim_speed.py: one bulk TCP Cubic flow across a dumbbell, timed.
//
// The reference point for the simulator's speed is the simulator most congestion-control papers
// use: ns-3 (https://www.nsnam.org; Debian 12 packages ns-3.37 as libns3-dev). The topology is the
// classic dumbbell with one pair of hosts:
//
//     sender --access-- left router ==bottleneck== right router --access-- receiver
//
// The bottleneck has the rate, one-way delay and DropTail buffer given on the command line, the
// same path pantheon-sim gets (a one-BDP DropTail queue on the data direction); the access links
// are ten times faster with no delay, so the round-trip time is twice the bottleneck's delay and
// no queue builds anywhere else. The traffic-control layer (ns-3's qdiscs) is removed from the
// bottleneck so that its device queue is the only buffer, a DropTail of exactly --queue-bytes.
//
// The flow: BulkSendApplication over ns-3's TcpCubic (Ha, Rhee and Xu, SIGOPS OSR 2008; RFC 9438)
// with 1448-byte segments (1500-byte IP packets with timestamps), every segment acknowledged
// (DelAckCount 1, as pantheon-udp acknowledges every datagram, so both simulators handle one
// acknowledgement per packet), socket buffers large enough never to limit the window.
//
// Prints one JSON line: simulated seconds, the wall time of Simulator::Run alone (set-up
// excluded, as pantheon-sim's own wall_s), bytes received and the resulting goodput.
//
// Build (bench/sim_speed.py does this): g++ -O2 -std=c++17 dumbbell.cc -o dumbbell \
//     $(pkg-config --libs ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control)

#include <chrono>
#include <cstdio>
#include <string>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

namespace {

const uint16_t kPort = 5000;
const uint32_t kSegmentBytes = 1448;
const double kAccessSpeedup = 10.0;

std::string Mbps(double rate_mbps) {
    return std::to_string(static_cast<uint64_t>(rate_mbps * 1e6)) + "bps";
}

}  // namespace

int main(int argc, char* argv[]) {
    double rate_mbps = 12.0;
    double delay_ms = 20.0;
    uint32_t queue_bytes = 0;
    double seconds = 30.0;
    CommandLine cmd;
    cmd.AddValue("rate-mbps", "bottleneck rate, Mbit/s, each way", rate_mbps);
    cmd.AddValue("delay-ms", "bottleneck one-way delay, ms", delay_ms);
    cmd.AddValue("queue-bytes", "bottleneck DropTail buffer, bytes (0: one bandwidth-delay product)", queue_bytes);
    cmd.AddValue("seconds", "simulated seconds", seconds);
    cmd.Parse(argc, argv);
    if (queue_bytes == 0) {
        queue_bytes = static_cast<uint32_t>(rate_mbps * 1e6 / 8 * 2 * delay_ms / 1e3);
    }
    // Room for the largest window the path can hold (BDP + buffer), twice over.
    uint32_t socket_bytes = 4 * queue_bytes + (1u << 20);

    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(kSegmentBytes));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(socket_bytes));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(socket_bytes));

    NodeContainer nodes;
    nodes.Create(4);  // sender, left router, right router, receiver
    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", StringValue(Mbps(rate_mbps * kAccessSpeedup)));
    access.SetChannelAttribute("Delay", StringValue("0ms"));
    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", StringValue(Mbps(rate_mbps)));
    bottleneck.SetChannelAttribute("Delay", TimeValue(MicroSeconds(static_cast<int64_t>(delay_ms * 1e3))));
    bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                        QueueSizeValue(QueueSize(QueueSizeUnit::BYTES, queue_bytes)));

    NetDeviceContainer left = access.Install(nodes.Get(0), nodes.Get(1));
    NetDeviceContainer middle = bottleneck.Install(nodes.Get(1), nodes.Get(2));
    NetDeviceContainer right = access.Install(nodes.Get(2), nodes.Get(3));

    InternetStackHelper stack;
    stack.InstallAll();

    Ipv4AddressHelper addresses;
    addresses.SetBase("10.1.1.0", "255.255.255.0");
    addresses.Assign(left);
    addresses.SetBase("10.1.2.0", "255.255.255.0");
    addresses.Assign(middle);
    addresses.SetBase("10.1.3.0", "255.255.255.0");
    Ipv4InterfaceContainer receiver = addresses.Assign(right);
    // Assign() gives each device ns-3's default qdisc; only then can the bottleneck's be removed.
    TrafficControlHelper qdiscs;
    qdiscs.Uninstall(middle);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), kPort));
    ApplicationContainer sink_app = sink.Install(nodes.Get(3));
    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(receiver.GetAddress(1), kPort));
    bulk.SetAttribute("MaxBytes", UintegerValue(0));
    bulk.SetAttribute("SendSize", UintegerValue(kSegmentBytes));
    ApplicationContainer bulk_app = bulk.Install(nodes.Get(0));
    sink_app.Start(Seconds(0.0));
    bulk_app.Start(Seconds(0.0));
    Simulator::Stop(Seconds(seconds));

    auto started = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    uint64_t received_bytes = DynamicCast<PacketSink>(sink_app.Get(0))->GetTotalRx();
    std::printf("{\"sim_s\": %.6f, \"wall_s\": %.6f, \"received_bytes\": %llu, \"throughput_mbps\": %.3f, "
                "\"queue_bytes\": %u}\n",
                seconds, wall_s, static_cast<unsigned long long>(received_bytes),
                received_bytes * 8.0 / seconds / 1e6, queue_bytes);
    Simulator::Destroy();
    return 0;
}

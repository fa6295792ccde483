// ns-3's side of bench/aqm_ns3.py: one bulk TCP flow across a dumbbell whose bottleneck queue is
// ns-3's CoDel, PIE or FQ-CoDel, with each data packet's queueing delay at the bottleneck written out.
//
// The topology is bench/ns3/dumbbell.cc's (sim_speed.py's), one pair of hosts:
//
//     sender --access-- left router ==bottleneck== right router --access-- receiver
//
// The bottleneck has the rate and one-way delay given on the command line; the access links are ten
// times faster with no delay, so the round-trip time is twice the bottleneck's delay and no queue
// builds anywhere else. The one queue discipline in the network is the --queue on the left router's
// bottleneck device (the data direction), installed with the traffic-control layer:
//
//   codel     CoDelQueueDisc (RFC 8289): Target, Interval, MaxSize
//   pie       PieQueueDisc (RFC 8033): QueueDelayReference, Tupdate, MaxBurstAllowance, MaxSize
//   fq-codel  FqCoDelQueueDisc (RFC 8290): ns-3's defaults but MaxSize (and UseEcn, below)
//   droptail  FifoQueueDisc: MaxSize only, the control without an AQM
//
// the AQMs with ECN off (UseEcn false; TCP's UseEcn is Off by default), so the AQM drops. Every other
// qdisc, ns-3's default FqCoDel on each device, is removed. Below a qdisc, ns-3's device has its own
// DropTail queue (100 packets by default), which the qdisc fills before it holds anything; the
// bottleneck's device queue is cut to one packet, the smallest there is, so the backlog sits in
// the qdisc where the AQM sees it (ns-3's traffic-control examples do the same). The ACK direction's
// device queue stays at 100 packets.
//
// The flow: BulkSendApplication over TcpCubic or TcpNewReno, 1448-byte segments (1500-byte IP
// packets with timestamps), every segment acknowledged (DelAckCount 1), socket buffers large
// enough never to limit the window.
//
// Measured per packet that reaches the bottleneck queue, keyed by the packet's uid (kept by every
// copy and header added on its way):
//   enqueue    the root qdisc's Enqueue trace: the packet reached the bottleneck queue
//   dequeue    the root qdisc's Dequeue trace: it went from the qdisc to the device queue
//   tx end     the bottleneck device's PhyTxEnd trace: its last bit was serialised
//   drop       the root qdisc's Drop trace (the limit, or the AQM; FQ-CoDel's children report to it)
// and written, one line per packet, in time order, to --log FILE, in the shape of our link log:
//   t_us - ip_bytes queue_delay_us qdisc_sojourn_us     it left the bottleneck (t_us: tx end)
//   t_us d ip_bytes                                      the qdisc dropped it
// where queue_delay = tx end − enqueue − the packet's own serialisation time (its bytes with the
// 2-byte PPP header at the bottleneck rate): how long it waited at the bottleneck before its
// transmission began, qdisc and device queue together; qdisc_sojourn = dequeue − enqueue, the
// sojourn time the AQM itself acts on (what the qdisc's SojournTime trace reports).
//
// Prints one JSON line: simulated seconds, the receiver's bytes, the qdisc's drop counts by
// ns-3's reason names and its packets enqueued, and the attributes the qdisc ran with.
//
// Build (bench/aqm_ns3.py does this):
//     g++ -O2 -std=c++17 aqm_dumbbell.cc -o aqm_dumbbell $(pkg-config --libs-only-l ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control)

#include <cstdio>
#include <fstream>
#include <string>
#include <unordered_map>

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
const uint32_t kPppHeaderBytes = 2;

std::string Bps(double rate_mbps) {
    return std::to_string(static_cast<uint64_t>(rate_mbps * 1e6)) + "bps";
}

// The bottleneck's per-packet bookkeeping, fed by the traces.
struct Bottleneck {
    double rate_bps = 0;
    std::unordered_map<uint64_t, int64_t> enqueued_ns;
    std::unordered_map<uint64_t, int64_t> sojourn_ns;
    std::ofstream out;

    void Enqueued(Ptr<const QueueDiscItem> item) {
        enqueued_ns[item->GetPacket()->GetUid()] = Simulator::Now().GetNanoSeconds();
    }

    void Dequeued(Ptr<const QueueDiscItem> item) {
        uint64_t uid = item->GetPacket()->GetUid();
        auto at = enqueued_ns.find(uid);
        if (at != enqueued_ns.end()) {
            sojourn_ns[uid] = Simulator::Now().GetNanoSeconds() - at->second;
        }
    }

    void Dropped(Ptr<const QueueDiscItem> item) {
        out << Simulator::Now().GetMicroSeconds() << " d " << item->GetSize() << '\n';
        uint64_t uid = item->GetPacket()->GetUid();
        enqueued_ns.erase(uid);
        sojourn_ns.erase(uid);
    }

    void TransmissionEnded(Ptr<const Packet> packet) {
        uint64_t uid = packet->GetUid();
        auto at = enqueued_ns.find(uid);
        auto sojourn = sojourn_ns.find(uid);
        if (at == enqueued_ns.end() || sojourn == sojourn_ns.end()) {
            return;
        }
        int64_t now_ns = Simulator::Now().GetNanoSeconds();
        double serialisation_ns = packet->GetSize() * 8.0 / rate_bps * 1e9;
        double queue_delay_ns = static_cast<double>(now_ns - at->second) - serialisation_ns;
        out << now_ns / 1000 << " - " << packet->GetSize() - kPppHeaderBytes << ' '
            << static_cast<int64_t>(queue_delay_ns / 1000 + 0.5) << ' ' << sojourn->second / 1000 << '\n';
        enqueued_ns.erase(at);
        sojourn_ns.erase(sojourn);
    }
};

std::string Json(const std::string& text) {
    std::string quoted = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            quoted += '\\';
        }
        quoted += c;
    }
    return quoted + "\"";
}

std::string Counts(const std::map<std::string, uint32_t, std::less<>>& counts) {
    std::string text = "{";
    for (const auto& [reason, n] : counts) {
        text += (text.size() > 1 ? ", " : "") + Json(reason) + ": " + std::to_string(n);
    }
    return text + "}";
}

// Those of `names` the qdisc has, with the values it ran with, as ns-3 writes them.
std::string Attributes(Ptr<QueueDisc> qdisc, std::initializer_list<const char*> names) {
    std::string text = "{";
    for (const char* name : names) {
        TypeId::AttributeInformation info;
        if (!qdisc->GetInstanceTypeId().LookupAttributeByName(name, &info)) {
            continue;
        }
        Ptr<AttributeValue> value = info.checker->Create();
        qdisc->GetAttribute(name, *value);
        text += (text.size() > 1 ? ", " : "") + Json(name) + ": " + Json(value->SerializeToString(info.checker));
    }
    return text + "}";
}

}  // namespace

int main(int argc, char* argv[]) {
    double rate_mbps = 12.0;
    double delay_ms = 20.0;
    std::string queue = "codel";
    uint32_t limit_packets = 1000;
    std::string cc = "cubic";
    double seconds = 30.0;
    uint32_t run = 1;
    std::string log = "bottleneck.log";
    CommandLine cmd;
    cmd.AddValue("rate-mbps", "bottleneck rate, Mbit/s, each way", rate_mbps);
    cmd.AddValue("delay-ms", "bottleneck one-way delay, ms", delay_ms);
    cmd.AddValue("queue", "bottleneck qdisc on the data direction: codel, pie, fq-codel or droptail", queue);
    cmd.AddValue("limit-packets", "the qdisc's limit (MaxSize), packets", limit_packets);
    cmd.AddValue("cc", "TCP congestion control: cubic (TcpCubic) or reno (TcpNewReno)", cc);
    cmd.AddValue("seconds", "simulated seconds", seconds);
    cmd.AddValue("run", "ns-3's RngRun: PIE's random drops, FQ-CoDel's hash perturbation", run);
    cmd.AddValue("log", "file for one line per packet leaving or dropped at the bottleneck", log);
    cmd.Parse(argc, argv);

    std::string qdisc_type;
    if (queue == "codel") {
        qdisc_type = "ns3::CoDelQueueDisc";
    } else if (queue == "pie") {
        qdisc_type = "ns3::PieQueueDisc";
    } else if (queue == "fq-codel") {
        qdisc_type = "ns3::FqCoDelQueueDisc";
    } else if (queue == "droptail") {
        qdisc_type = "ns3::FifoQueueDisc";
    } else {
        std::fprintf(stderr, "aqm_dumbbell: unknown --queue '%s'; use codel, pie, fq-codel or droptail\n", queue.c_str());
        return 2;
    }
    TypeId tcp;
    if (cc == "cubic") {
        tcp = TcpCubic::GetTypeId();
    } else if (cc == "reno") {
        tcp = TcpNewReno::GetTypeId();
    } else {
        std::fprintf(stderr, "aqm_dumbbell: unknown --cc '%s'; use cubic or reno\n", cc.c_str());
        return 2;
    }
    RngSeedManager::SetRun(run);

    // Room for the largest window the path can hold (BDP + the qdisc's limit), twice over.
    uint32_t socket_bytes = 2 * (static_cast<uint32_t>(rate_mbps * 1e6 / 8 * 2 * delay_ms / 1e3) + limit_packets * 1500);
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(tcp));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(kSegmentBytes));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(socket_bytes));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(socket_bytes));

    NodeContainer nodes;
    nodes.Create(4);  // sender, left router, right router, receiver
    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", StringValue(Bps(rate_mbps * kAccessSpeedup)));
    access.SetChannelAttribute("Delay", StringValue("0ms"));
    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", StringValue(Bps(rate_mbps)));
    bottleneck.SetChannelAttribute("Delay", TimeValue(MicroSeconds(static_cast<int64_t>(delay_ms * 1e3))));
    bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1p")));

    NetDeviceContainer left = access.Install(nodes.Get(0), nodes.Get(1));
    NetDeviceContainer middle = bottleneck.Install(nodes.Get(1), nodes.Get(2));
    NetDeviceContainer right = access.Install(nodes.Get(2), nodes.Get(3));
    DynamicCast<PointToPointNetDevice>(middle.Get(1))->GetQueue()->SetMaxSize(QueueSize("100p"));

    InternetStackHelper stack;
    stack.InstallAll();

    Ipv4AddressHelper addresses;
    addresses.SetBase("10.1.1.0", "255.255.255.0");
    addresses.Assign(left);
    addresses.SetBase("10.1.2.0", "255.255.255.0");
    addresses.Assign(middle);
    addresses.SetBase("10.1.3.0", "255.255.255.0");
    Ipv4InterfaceContainer receiver = addresses.Assign(right);
    // Assign() gives each device ns-3's default qdisc; only then can they be replaced.
    TrafficControlHelper none;
    none.Uninstall(left);
    none.Uninstall(middle);
    none.Uninstall(right);
    TrafficControlHelper aqm;
    aqm.SetRootQueueDisc(qdisc_type, "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, limit_packets)));
    QueueDiscContainer installed = aqm.Install(middle.Get(0));
    Ptr<QueueDisc> qdisc = installed.Get(0);
    if (queue != "droptail") {
        qdisc->SetAttribute("UseEcn", BooleanValue(false));
    }
    if (queue == "codel") {
        qdisc->SetAttribute("Target", StringValue("5ms"));
        qdisc->SetAttribute("Interval", StringValue("100ms"));
    } else if (queue == "pie") {
        qdisc->SetAttribute("QueueDelayReference", TimeValue(MilliSeconds(15)));
        qdisc->SetAttribute("Tupdate", TimeValue(MilliSeconds(15)));
        qdisc->SetAttribute("MaxBurstAllowance", TimeValue(MilliSeconds(150)));
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    Bottleneck watch;
    watch.rate_bps = rate_mbps * 1e6;
    watch.out.open(log);
    if (!watch.out) {
        std::fprintf(stderr, "aqm_dumbbell: cannot write --log '%s'\n", log.c_str());
        return 2;
    }
    qdisc->TraceConnectWithoutContext("Enqueue", MakeCallback(&Bottleneck::Enqueued, &watch));
    qdisc->TraceConnectWithoutContext("Dequeue", MakeCallback(&Bottleneck::Dequeued, &watch));
    qdisc->TraceConnectWithoutContext("Drop", MakeCallback(&Bottleneck::Dropped, &watch));
    middle.Get(0)->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&Bottleneck::TransmissionEnded, &watch));

    PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), kPort));
    ApplicationContainer sink_app = sink.Install(nodes.Get(3));
    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(receiver.GetAddress(1), kPort));
    bulk.SetAttribute("MaxBytes", UintegerValue(0));
    bulk.SetAttribute("SendSize", UintegerValue(kSegmentBytes));
    ApplicationContainer bulk_app = bulk.Install(nodes.Get(0));
    sink_app.Start(Seconds(0.0));
    bulk_app.Start(Seconds(0.0));
    Simulator::Stop(Seconds(seconds));
    Simulator::Run();
    watch.out.close();

    const QueueDisc::Stats& stats = qdisc->GetStats();
    uint64_t received_bytes = DynamicCast<PacketSink>(sink_app.Get(0))->GetTotalRx();
    std::string attributes = Attributes(qdisc, {"MaxSize", "UseEcn", "Target", "Interval", "QueueDelayReference", "Tupdate",
                                                "MaxBurstAllowance", "UseDequeueRateEstimator", "UseCapDropAdjustment",
                                                "UseDerandomization", "A", "B", "Flows", "DropBatchSize", "Quantum"});
    std::printf("{\"sim_s\": %.6f, \"received_bytes\": %llu, \"qdisc\": %s, \"enqueued_packets\": %u, "
                "\"drops_before_enqueue\": %s, \"drops_after_dequeue\": %s, \"attributes\": %s}\n",
                seconds, static_cast<unsigned long long>(received_bytes), Json(qdisc_type).c_str(), stats.nTotalEnqueuedPackets,
                Counts(stats.nDroppedPacketsBeforeEnqueue).c_str(), Counts(stats.nDroppedPacketsAfterDequeue).c_str(),
                attributes.c_str());
    Simulator::Destroy();
    return 0;
}

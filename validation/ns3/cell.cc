// The project's 802.11a cell as ns-3.37 sees it (our own scenario against ns-3's API).
//
//   cell dcf N SECONDS WARMUP SEED [PREAMBLE]
//                                    N saturated stations send to one sink: plain DCF (non-QoS
//                                    ad hoc MAC, so no beacons or association), no RTS/CTS,
//                                    YansWifiPhy/YansWifiChannel, data 54 Mbit/s, basic rates
//                                    6/12/24 Mbit/s (ACK at 24), 1536-byte MPDUs. Prints one JSON
//                                    line: successes and DATA attempts in the measured window, and
//                                    the whole run's successes and wall seconds. PREAMBLE 1 keeps
//                                    ns-3's default PHY (its threshold preamble detection model);
//                                    0 (the default) disables it.
//   cell per BYTES                   The SNR (dB) at which a frame of BYTES sees 10% packet error,
//                                    per 802.11ac MCS 0-8 (20 MHz, 800 ns GI, one stream), from
//                                    ns-3's TableBasedErrorRateModel (its default) and NIST's.
//   cell burst COUNT BYTES PER SEED  A dedicated point-to-point link (PointToPointNetDevice, 54
//                                    Mbit/s, no delay) with a RateErrorModel dropping packets
//                                    with probability PER: the burst's transfer time and losses.
//
// CELL_LOG=1 prints every transmission, MAC drop and PHY drop (with its reason) to stderr;
// CELL_CURVES=1 adds each MCS's PER-vs-SNR curve to `cell per`.
//
// The stations stand together 5 m from the sink, so every station hears every frame at the same
// power. With preamble detection disabled (ns-3 < 3.30 behaviour, and the standard's) a station
// locks onto any frame it hears, so two colliding frames are a reception that fails, and the
// stations that did not transmit defer EIFS, as 802.11's DCF specifies. With ns-3's default
// threshold model (a preamble is detected when its SNR, interference included, is at least 4 dB)
// equal-power colliding frames are never detected: the others see energy only and defer DIFS.
#include "ns3/core-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/wifi-module.h"
#include "cell_common.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace ns3;


static uint64_t g_ok = 0, g_okAll = 0, g_tx = 0;
static double g_from = 0, g_to = 0;

static bool
InWindow()
{
    double t = Simulator::Now().GetSeconds();
    return t >= g_from && t < g_to;
}

static void
SinkRx(Ptr<const Packet> p)
{
    if (p->GetSize() < 1000)
        return;
    g_okAll++;
    if (InWindow())
        g_ok++;
}

static bool g_log = std::getenv("CELL_LOG") != nullptr;   // every transmission, for debugging

static void
LogTx(std::string who, Ptr<const Packet> p, double)
{
    std::fprintf(stderr, "tx %.9f %s %u\n", Simulator::Now().GetSeconds(), who.c_str(), p->GetSize());
}

static void
LogRxDrop(std::string who, Ptr<const Packet>, WifiPhyRxfailureReason reason)
{
    std::fprintf(stderr, "rxdrop %.9f %s %d\n", Simulator::Now().GetSeconds(), who.c_str(), (int)reason);
}

static uint64_t g_drops = 0;

static void
Dropped(std::string who, WifiMacDropReason reason, Ptr<const WifiMpdu>)
{
    if (reason == WIFI_MAC_DROP_REACHED_RETRY_LIMIT && InWindow())
        g_drops++;
    if (g_log)
        std::fprintf(stderr, "drop %.9f %s %d\n", Simulator::Now().GetSeconds(), who.c_str(), (int)reason);
}

static void
DataTx(Ptr<const Packet> p, double)
{
    if (p->GetSize() >= 1000 && InWindow())
        g_tx++;
}

static int
Dcf(uint32_t n, double seconds, double warmup, uint32_t seed, bool preamble)
{
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);
    // frames wait in a saturated queue for seconds at large N: none may expire (ns-3 drops them
    // after 500 ms by default, which would only cost events)
    Config::SetDefault("ns3::WifiMacQueue::MaxDelay", TimeValue(Seconds(1000)));
    NodeContainer sink, stations;
    sink.Create(1);
    stations.Create(n);

    WifiHelper wifi = DcfWifi();
    YansWifiChannelHelper channel = YansWifiChannelHelper::Default();
    YansWifiPhyHelper phy;
    phy.SetChannel(channel.Create());
    if (!preamble)
        phy.DisablePreambleDetectionModel();
    auto [sinkDev, staDev] = InstallCell(wifi, phy, sink, stations);

    MobilityHelper mobility;
    Ptr<ListPositionAllocator> pos = CreateObject<ListPositionAllocator>();
    pos->Add(Vector(0, 0, 0));
    for (uint32_t i = 0; i < n; i++)
        pos->Add(Vector(5, 0, 0));
    mobility.SetPositionAllocator(pos);
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(NodeContainer(sink, stations));

    NetDeviceContainer all(sinkDev, staDev);
    AddBasicModes(all);
    Ptr<WifiNetDevice> s = DynamicCast<WifiNetDevice>(sinkDev.Get(0));
    s->GetMac()->TraceConnectWithoutContext("MacRx", MakeCallback(&SinkRx));
    if (g_log)
        for (uint32_t i = 0; i < all.GetN(); i++)
            DynamicCast<WifiNetDevice>(all.Get(i))->GetPhy()->TraceConnect("PhyTxBegin", std::to_string(i),
                                                                           MakeCallback(&LogTx));
    if (g_log)
        for (uint32_t i = 1; i < all.GetN(); i++)
            DynamicCast<WifiNetDevice>(all.Get(i))->GetPhy()->TraceConnect("PhyRxDrop", std::to_string(i),
                                                                           MakeCallback(&LogRxDrop));
    for (uint32_t i = 0; i < n; i++)
    {
        Ptr<WifiNetDevice> d = DynamicCast<WifiNetDevice>(staDev.Get(i));
        d->GetPhy()->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&DataTx));
        d->GetMac()->TraceConnect("DroppedMpdu", std::to_string(i + 1), MakeCallback(&Dropped));
        Simulator::Schedule(MicroSeconds(10 + i), &TopUp, d, s->GetAddress());
    }
    g_from = warmup;
    g_to = warmup + seconds;
    Simulator::Stop(Seconds(g_to));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Simulator::Destroy();
    std::printf("{\"n\": %u, \"seconds\": %.6f, \"warmup\": %.6f, \"seed\": %u, \"successes\": %llu, "
                "\"attempts\": %llu, \"successes_all\": %llu, \"simulated_s\": %.6f, \"wall_s\": %.6f, "
                "\"drops\": %llu, \"payload_bytes\": %u}\n",
                n, seconds, warmup, seed, (unsigned long long)g_ok, (unsigned long long)g_tx,
                (unsigned long long)g_okAll, g_to, wall, (unsigned long long)g_drops, PAYLOAD);
    return 0;
}

static int
Per(uint32_t bytes)
{
    WifiMode modes[] = {VhtPhy::GetVhtMcs0(), VhtPhy::GetVhtMcs1(), VhtPhy::GetVhtMcs2(),
                        VhtPhy::GetVhtMcs3(), VhtPhy::GetVhtMcs4(), VhtPhy::GetVhtMcs5(),
                        VhtPhy::GetVhtMcs6(), VhtPhy::GetVhtMcs7(), VhtPhy::GetVhtMcs8()};
    Ptr<ErrorRateModel> table = CreateObject<TableBasedErrorRateModel>();
    Ptr<ErrorRateModel> nist = CreateObject<NistErrorRateModel>();
    for (int m = 0; m < 9; m++)
    {
        WifiTxVector tv;
        tv.SetMode(modes[m]);
        tv.SetPreambleType(WIFI_PREAMBLE_VHT_SU);
        tv.SetChannelWidth(20);
        tv.SetGuardInterval(800);
        tv.SetNss(1);
        tv.SetNTx(1);
        uint64_t bits = 8ull * bytes;
        std::printf("{\"mcs\": %d, \"bytes\": %u, \"table_based_db\": %.3f, \"nist_db\": %.3f}\n", m, bytes,
                    Threshold(table, modes[m], tv, bits, 0.1), Threshold(nist, modes[m], tv, bits, 0.1));
        if (!std::getenv("CELL_CURVES"))   // the PER-vs-SNR curves too, on request
            continue;
        for (double snr = -2; snr <= 36; snr += 0.5)
            std::printf("{\"mcs\": %d, \"snr_db\": %.1f, \"per_table\": %.6g, \"per_nist\": %.6g}\n", m, snr,
                        1 - table->GetChunkSuccessRate(modes[m], tv, std::pow(10.0, snr / 10), bits),
                        1 - nist->GetChunkSuccessRate(modes[m], tv, std::pow(10.0, snr / 10), bits));
    }
    return 0;
}

static uint64_t g_burstRx = 0;
static double g_burstLast = 0;

static void
BurstRx(Ptr<const Packet>)
{
    g_burstRx++;
    g_burstLast = Simulator::Now().GetSeconds();
}

static int
Burst(uint32_t count, uint32_t bytes, double per, uint32_t seed)
{
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);
    NodeContainer nodes;
    nodes.Create(2);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue("54Mbps"));
    p2p.SetChannelAttribute("Delay", StringValue("0ms"));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue(std::to_string(count + 1) + "p"));
    NetDeviceContainer d = p2p.Install(nodes);
    Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
    em->SetAttribute("ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
    em->SetAttribute("ErrorRate", DoubleValue(per));
    em->AssignStreams(seed);
    d.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(em));
    d.Get(1)->TraceConnectWithoutContext("MacRx", MakeCallback(&BurstRx));
    for (uint32_t i = 0; i < count; i++)
        d.Get(0)->Send(Create<Packet>(bytes - 2), d.Get(1)->GetAddress(), 0x0800);  // + 2 B PPP header
    Simulator::Run();
    Simulator::Destroy();
    std::printf("{\"count\": %u, \"bytes\": %u, \"per\": %.6f, \"seed\": %u, \"received\": %llu, "
                "\"last_arrival_s\": %.9f}\n",
                count, bytes, per, seed, (unsigned long long)g_burstRx, g_burstLast);
    return 0;
}

int
main(int argc, char** argv)
{
    if (argc >= 6 && !std::strcmp(argv[1], "dcf"))
        return Dcf(std::atoi(argv[2]), std::atof(argv[3]), std::atof(argv[4]), std::atoi(argv[5]),
                   argc >= 7 && std::atoi(argv[6]) != 0);
    if (argc >= 3 && !std::strcmp(argv[1], "per"))
        return Per(std::atoi(argv[2]));
    if (argc >= 6 && !std::strcmp(argv[1], "burst"))
        return Burst(std::atoi(argv[2]), std::atoi(argv[3]), std::atof(argv[4]), std::atoi(argv[5]));
    std::fprintf(stderr, "usage: cell dcf N SECONDS WARMUP SEED [PREAMBLE] | cell per BYTES | cell burst COUNT BYTES PER SEED\n");
    return 2;
}

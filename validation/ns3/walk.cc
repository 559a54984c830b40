// Stations walking away from an access point, as ns-3.37 sees them (our own program against
// ns-3's API; validation/ns3/run.py builds and runs it).
//
//   walk run FILE SECONDS SEED   FILE: one line per station "sta X Y VX VY" (metres, m/s; the AP
//                                is at the origin), then lines "rate STATION T MBPS": from T on the
//                                station sends DATA at MBPS (an 802.11a OFDM rate), and optionally
//                                lines "wp STATION T X Y": the station follows these waypoints
//                                (straight lines at constant speed between them, ns-3's
//                                WaypointMobilityModel) instead of X Y VX VY. Every station
//                                sends saturated 1536-byte MPDUs to the AP for SECONDS. Prints one
//                                JSON line per station and 1 s window: payload bytes the AP
//                                received, seconds of the station's PHY in each state (TX, RX,
//                                IDLE + CCA_BUSY + SWITCHING, SLEEP), and the joules its
//                                WifiRadioEnergyModel counted; then one line with the wall seconds.
//   walk per BYTES               Per 802.11a OFDM rate: the SNR (dB) at which a frame of BYTES sees
//                                10% and 50% packet error in ns-3's TableBasedErrorRateModel.
//   walk curve BYTES FROM TO STEP Per rate: its packet error rate at SNRs FROM..TO dB (by STEP)
//                                around its 10% point, one JSON line each.
//
// The cell: plain DCF (non-QoS ad hoc MAC, no RTS/CTS), YansWifiPhy at 20 dBm with a 7 dB noise
// figure (the defaults of ours), LogDistancePropagationLossModel (exponent 3, 40 dB at 1 m),
// TableBasedErrorRateModel, preamble detection disabled (its threshold model also ignores frames
// below -82 dBm, a floor our link model does not have), ACK at the highest basic rate (6, 12, 24)
// not above the data rate. Each station carries a BasicEnergySource (3 V, never empty) and a
// WifiRadioEnergyModel with ns-3's default currents. The data rate is a constant rate per distance
// band (ConstantRateWifiManager's DataMode, set at each band's start).
#include "ns3/core-module.h"
#include "ns3/energy-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"
#include "cell_common.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;


struct Station
{
    double x, y, vx, vy;
    std::vector<std::pair<double, double>> rates;   // (from t, Mbit/s)
    std::vector<std::array<double, 3>> waypoints;   // (t, x, y); empty: constant velocity
};

// per station, per window: bytes received at the AP, seconds per PHY state
static std::vector<std::vector<double>> g_bytes;
static std::vector<std::vector<std::array<double, 4>>> g_state;   // tx, rx, idle, sleep
static std::vector<std::vector<double>> g_joules;
static uint32_t g_windows = 0;
static std::map<Mac48Address, uint32_t> g_index;

static bool
ApRx(Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address& from)
{
    auto it = g_index.find(Mac48Address::ConvertFrom(from));
    uint32_t w = (uint32_t)Simulator::Now().GetSeconds();
    if (p->GetSize() >= 1000 && it != g_index.end() && w < g_windows)
        g_bytes[it->second][w] += PAYLOAD;
    return true;
}

static int
Slot(WifiPhyState s)
{
    switch (s)
    {
    case WifiPhyState::TX:
        return 0;
    case WifiPhyState::RX:
        return 1;
    case WifiPhyState::SLEEP:
        return 3;
    default:   // IDLE, CCA_BUSY, SWITCHING: ns-3's idle, CCA-busy and switching currents are equal
        return 2;
    }
}

// a state period [start, start + duration) spread over the 1 s windows it covers
static void
StateLog(uint32_t i, Time start, Time duration, WifiPhyState state)
{
    double a = start.GetSeconds(), b = a + duration.GetSeconds();
    int k = Slot(state);
    while (a < b)
    {
        uint32_t w = (uint32_t)a;
        if (w >= g_windows)
            break;
        double end = std::min(b, (double)(w + 1));
        g_state[i][w][k] += end - a;
        a = end;
    }
}

static void
SetRate(Ptr<WifiNetDevice> dev, double mbps)
{
    std::ostringstream mode;
    mode << "OfdmRate" << mbps << "Mbps";
    dev->GetRemoteStationManager()->SetAttribute("DataMode", StringValue(mode.str()));
}

static void
Joules(uint32_t i, uint32_t w, Ptr<DeviceEnergyModel> m)
{
    g_joules[i][w] = m->GetTotalEnergyConsumption();
}

static int
Run(const char* file, double seconds, uint32_t seed)
{
    std::vector<Station> sta;
    std::ifstream in(file);
    std::string kind;
    while (in >> kind)
    {
        if (kind == "sta")
        {
            Station s;
            in >> s.x >> s.y >> s.vx >> s.vy;
            sta.push_back(s);
        }
        else if (kind == "rate")
        {
            uint32_t i;
            double t, r;
            in >> i >> t >> r;
            sta.at(i).rates.emplace_back(t, r);
        }
        else if (kind == "wp")
        {
            uint32_t i;
            double t, x, y;
            in >> i >> t >> x >> y;
            sta.at(i).waypoints.push_back({t, x, y});
        }
    }
    uint32_t n = sta.size();
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);
    Config::SetDefault("ns3::WifiMacQueue::MaxDelay", TimeValue(Seconds(1000)));
    g_windows = (uint32_t)std::ceil(seconds);
    g_bytes.assign(n, std::vector<double>(g_windows, 0.0));
    g_state.assign(n, std::vector<std::array<double, 4>>(g_windows, {0, 0, 0, 0}));
    g_joules.assign(n, std::vector<double>(g_windows + 1, 0.0));

    NodeContainer ap, stations;
    ap.Create(1);
    stations.Create(n);
    WifiHelper wifi = DcfWifi();
    YansWifiChannelHelper channel;
    channel.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel");
    channel.AddPropagationLoss("ns3::LogDistancePropagationLossModel",
                               "Exponent", DoubleValue(3.0),
                               "ReferenceDistance", DoubleValue(1.0),
                               "ReferenceLoss", DoubleValue(40.0));
    YansWifiPhyHelper phy;
    phy.SetChannel(channel.Create());
    phy.Set("TxPowerStart", DoubleValue(20.0));
    phy.Set("TxPowerEnd", DoubleValue(20.0));
    phy.Set("RxNoiseFigure", DoubleValue(7.0));
    phy.SetErrorRateModel("ns3::TableBasedErrorRateModel");
    phy.DisablePreambleDetectionModel();
    auto [apDev, staDev] = InstallCell(wifi, phy, ap, stations);

    MobilityHelper fixed;
    fixed.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    fixed.Install(ap);
    ap.Get(0)->GetObject<MobilityModel>()->SetPosition(Vector(0, 0, 0));
    for (uint32_t i = 0; i < n; i++)
    {
        if (sta[i].waypoints.empty())
        {
            Ptr<ConstantVelocityMobilityModel> m = CreateObject<ConstantVelocityMobilityModel>();
            stations.Get(i)->AggregateObject(m);
            m->SetPosition(Vector(sta[i].x, sta[i].y, 0));
            m->SetVelocity(Vector(sta[i].vx, sta[i].vy, 0));
        }
        else
        {
            Ptr<WaypointMobilityModel> m = CreateObject<WaypointMobilityModel>();
            stations.Get(i)->AggregateObject(m);
            for (auto& w : sta[i].waypoints)
                m->AddWaypoint(Waypoint(Seconds(w[0]), Vector(w[1], w[2], 0)));
        }
    }

    NetDeviceContainer all(apDev, staDev);
    AddBasicModes(all);

    BasicEnergySourceHelper source;
    source.Set("BasicEnergySourceInitialEnergyJ", DoubleValue(1e9));
    EnergySourceContainer sources = source.Install(stations);
    WifiRadioEnergyModelHelper radio;
    DeviceEnergyModelContainer models = radio.Install(staDev, sources);

    Ptr<WifiNetDevice> a = DynamicCast<WifiNetDevice>(apDev.Get(0));
    a->SetReceiveCallback(MakeCallback(&ApRx));
    for (uint32_t i = 0; i < n; i++)
    {
        Ptr<WifiNetDevice> d = DynamicCast<WifiNetDevice>(staDev.Get(i));
        g_index[d->GetMac()->GetAddress()] = i;
        d->GetPhy()->GetState()->TraceConnectWithoutContext("State", MakeBoundCallback(&StateLog, i));
        for (auto& [t, r] : sta[i].rates)
            Simulator::Schedule(Seconds(t), &SetRate, d, r);
        Simulator::Schedule(MicroSeconds(10 + i), &TopUp, d, a->GetAddress());
        for (uint32_t w = 0; w <= g_windows; w++)
            Simulator::Schedule(Seconds(w) - NanoSeconds(w == 0 ? 0 : 1), &Joules, i, w, models.Get(i));
    }
    Simulator::Stop(Seconds(seconds));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // the state each PHY is in at the end has not been logged yet: it runs to the end
    for (uint32_t i = 0; i < n; i++)
    {
        Ptr<WifiPhyStateHelper> st = DynamicCast<WifiNetDevice>(staDev.Get(i))->GetPhy()->GetState();
        double logged = 0;
        for (auto& w : g_state[i])
            logged += w[0] + w[1] + w[2] + w[3];
        StateLog(i, Seconds(logged), Seconds(seconds - logged), st->GetState());
    }
    Simulator::Destroy();
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t w = 0; w < g_windows; w++)
            std::printf("{\"station\": %u, \"window\": %u, \"bytes\": %.0f, \"tx_s\": %.9f, \"rx_s\": %.9f, "
                        "\"idle_s\": %.9f, \"sleep_s\": %.9f, \"joules\": %.9f}\n",
                        i, w, g_bytes[i][w], g_state[i][w][0], g_state[i][w][1], g_state[i][w][2],
                        g_state[i][w][3], g_joules[i][w + 1] - g_joules[i][w]);
    std::printf("{\"wall_s\": %.6f}\n", wall);
    return 0;
}

static int
Per(uint32_t bytes)
{
    Ptr<ErrorRateModel> table = CreateObject<TableBasedErrorRateModel>();
    double rates[] = {6, 9, 12, 18, 24, 36, 48, 54};
    for (double r : rates)
    {
        std::ostringstream name;
        name << "OfdmRate" << r << "Mbps";
        WifiMode mode(name.str());
        WifiTxVector tv;
        tv.SetMode(mode);
        tv.SetPreambleType(WIFI_PREAMBLE_LONG);
        tv.SetChannelWidth(20);
        // the PSDU's bits as ns-3's PHY counts them: 16 service + 8 x bytes + 6 tail
        uint64_t bits = 8ull * bytes + 22;
        std::printf("{\"rate_mbps\": %g, \"bytes\": %u, \"per10_db\": %.4f, \"per50_db\": %.4f, \"per90_db\": %.4f}\n",
                    r, bytes, Threshold(table, mode, tv, bits, 0.1), Threshold(table, mode, tv, bits, 0.5),
                    Threshold(table, mode, tv, bits, 0.9));
    }
    return 0;
}

// Per 802.11a OFDM rate: the packet error rate of a frame of BYTES in ns-3's
// TableBasedErrorRateModel at SNRs from FROM to TO dB (relative to the rate's 10% point) in
// steps of STEP dB.
static int
Curve(uint32_t bytes, double from, double to, double step)
{
    Ptr<ErrorRateModel> table = CreateObject<TableBasedErrorRateModel>();
    double rates[] = {6, 9, 12, 18, 24, 36, 48, 54};
    for (double r : rates)
    {
        std::ostringstream name;
        name << "OfdmRate" << r << "Mbps";
        WifiMode mode(name.str());
        WifiTxVector tv;
        tv.SetMode(mode);
        tv.SetPreambleType(WIFI_PREAMBLE_LONG);
        tv.SetChannelWidth(20);
        uint64_t bits = 8ull * bytes + 22;
        double thr = Threshold(table, mode, tv, bits, 0.1);
        for (double x = from; x <= to + 1e-9; x += step)
        {
            double snr = thr + x;
            double per = 1 - table->GetChunkSuccessRate(mode, tv, std::pow(10.0, snr / 10), bits);
            std::printf("{\"rate_mbps\": %g, \"snr_db\": %.4f, \"per\": %.6e}\n", r, snr, per);
        }
    }
    return 0;
}

int
main(int argc, char** argv)
{
    if (argc >= 5 && !std::strcmp(argv[1], "run"))
        return Run(argv[2], std::atof(argv[3]), std::atoi(argv[4]));
    if (argc >= 3 && !std::strcmp(argv[1], "per"))
        return Per(std::atoi(argv[2]));
    if (argc >= 6 && !std::strcmp(argv[1], "curve"))
        return Curve(std::atoi(argv[2]), std::atof(argv[3]), std::atof(argv[4]), std::atof(argv[5]));
    std::fprintf(stderr, "usage: walk run FILE SECONDS SEED | walk per BYTES | walk curve BYTES FROM TO STEP\n");
    return 2;
}

// What validation/ns3's programs (cell.cc, walk.cc) share: the frame, a saturated station's
// queue, 802.11a's basic rates and an error-rate model's threshold SNR.
#pragma once
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/wifi-module.h"

#include <cmath>
#include <utility>

namespace ns3
{

static const uint32_t MPDU = 1536;           // bytes on the air: 24 MAC + 8 LLC + 1500 + 4 FCS
static const uint32_t PAYLOAD = MPDU - 36;   // what Send() is given
static const uint32_t QUEUE_FILL = 50;       // frames kept in every station's MAC queue

// Keeps a station saturated: its MAC queue never runs dry (checked every 5 ms, far less than
// the time it takes to send QUEUE_FILL frames).
static void
TopUp(Ptr<WifiNetDevice> dev, Address to)
{
    Ptr<WifiMacQueue> q = dev->GetMac()->GetTxop()->GetWifiMacQueue();
    for (uint32_t n = q->GetNPackets(); n < QUEUE_FILL; n++)
        dev->Send(Create<Packet>(PAYLOAD), to, 0x0800);
    Simulator::Schedule(MilliSeconds(5), &TopUp, dev, to);
}

// 802.11a, one constant data rate (54 Mbit/s until told otherwise), no RTS/CTS, 7 attempts a frame.
static WifiHelper
DcfWifi()
{
    WifiHelper wifi;
    wifi.SetStandard(WIFI_STANDARD_80211a);
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                 "DataMode", StringValue("OfdmRate54Mbps"),
                                 "ControlMode", StringValue("OfdmRate24Mbps"),
                                 "RtsCtsThreshold", UintegerValue(65535),
                                 "MaxSsrc", UintegerValue(7));
    return wifi;
}

// The access point and the stations on one plain DCF cell (non-QoS ad hoc MAC: no beacons, no
// association), random streams assigned from 100: (AP device, station devices).
static std::pair<NetDeviceContainer, NetDeviceContainer>
InstallCell(WifiHelper& wifi, const YansWifiPhyHelper& phy, NodeContainer ap, NodeContainer stations)
{
    WifiMacHelper mac;
    mac.SetType("ns3::AdhocWifiMac", "QosSupported", BooleanValue(false));
    NetDeviceContainer a = wifi.Install(phy, mac, ap);
    NetDeviceContainer s = wifi.Install(phy, mac, stations);
    wifi.AssignStreams(NetDeviceContainer(a, s), 100);
    return {a, s};
}

// 802.11a's mandatory rates as every device's basic rates: an ACK goes at the highest of them
// not above the data rate.
static void
AddBasicModes(const NetDeviceContainer& devices)
{
    for (uint32_t i = 0; i < devices.GetN(); i++)
    {
        Ptr<WifiRemoteStationManager> m = DynamicCast<WifiNetDevice>(devices.Get(i))->GetRemoteStationManager();
        m->AddBasicMode(OfdmPhy::GetOfdmRate6Mbps());
        m->AddBasicMode(OfdmPhy::GetOfdmRate12Mbps());
        m->AddBasicMode(OfdmPhy::GetOfdmRate24Mbps());
    }
}

// The SNR (dB) at which a chunk of `bits` sees packet error `per` in `model` (bisection).
static double
Threshold(Ptr<ErrorRateModel> model, WifiMode mode, const WifiTxVector& tv, uint64_t bits, double per)
{
    double lo = -10, hi = 50;   // dB; success rate rises with SNR
    for (int i = 0; i < 60; i++)
    {
        double mid = 0.5 * (lo + hi);
        double ok = model->GetChunkSuccessRate(mode, tv, std::pow(10.0, mid / 10), bits);
        if (1 - ok > per)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

} // namespace ns3

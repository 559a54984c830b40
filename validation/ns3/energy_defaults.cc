// Prints the initial values of ns3::WifiRadioEnergyModel's attributes and of
// ns3::BasicEnergySource's, from the installed ns-3 (validation/ns3/run.py reads them).
#include "ns3/core-module.h"
#include "ns3/wifi-radio-energy-model.h"
#include "ns3/basic-energy-source.h"
#include <iostream>
using namespace ns3;
static void dump(TypeId tid) {
  for (uint32_t i = 0; i < tid.GetAttributeN(); i++) {
    auto info = tid.GetAttribute(i);
    std::cout << tid.GetName() << " " << info.name << " = "
              << info.initialValue->SerializeToString(info.checker) << "\n";
  }
}
int main() {
  dump(WifiRadioEnergyModel::GetTypeId());
  dump(BasicEnergySource::GetTypeId());
  return 0;
}

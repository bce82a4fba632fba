"""NVIDIA GPU table derived from NVIDIA's per-device lists and pci.ids. GENERATED: do not edit.

Command: scripts/nvidia-supported-gpus-table.py --manifest tests/fixtures/nvidia_gpus/sources.json
Inputs (copies or extracts, and their README, under tests/fixtures/nvidia_gpus/):
  - 510 supported-gpus.json: alex-tu-cc/get-nvidia-supported-gpus-json gh-pages bionic-nvidia-driver-510-supported-gpus.json, commit d67e961e5fd85a02745052acfd13fc24e8449d60 (2022-12-02)
  - 515 supported-gpus.json: alex-tu-cc/get-nvidia-supported-gpus-json gh-pages bionic-nvidia-driver-515-supported-gpus.json, commit d67e961e5fd85a02745052acfd13fc24e8449d60 (2022-12-02)
  - 525 supported-gpus.json: alex-tu-cc/get-nvidia-supported-gpus-json gh-pages focal-nvidia-driver-525-supported-gpus.json, commit 40678c28e943cf34be39ee436b7a3cddf21bfebf (2023-03-22)
  - 590 supported-gpus.json (extract): megvadulthangya/nvidia-driver-assistant (a copy of NVIDIA's nvidia-driver-assistant_0.23.48.01-1_all.deb) package 0.23.48.01-1 /usr/share/nvidia-driver-assistant/supported-gpus/supported-gpus.json, commit 407f8074002cf020eb0817b63ad4f9d7ca2b1fd6 (2025-12-08)
  - 525 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 525.147.05 README.md (section "Compatible GPUs" to the end), commit 207a166fc33db90b5bc21395f8d6b5489603ac10 (2023-10-31)
  - 535 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 535.288.01 README.md (section "Compatible GPUs" to the end), commit ef65a1309711a38041ece7ac3467d30a6e256d85 (2026-01-13)
  - 545 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 545.29.06 README.md (section "Compatible GPUs" to the end), commit 4c29105335610933e744f4ab2524ea63fc39edaf (2023-11-21)
  - 550 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 550.163.01 README.md (section "Compatible GPUs" to the end), commit 23e9e7621487fe632040a370249f690a456967dd (2025-04-17)
  - 555 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 555.58.02 README.md (section "Compatible GPUs" to the end), commit 1795a8bb20fe09f9939ca3e82d76791f5741e467 (2024-07-01)
  - 560 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 560.35.03 README.md (section "Compatible GPUs" to the end), commit ed4be649623435ebb04f5e93f859bf46d977daa4 (2024-08-19)
  - 565 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 565.77 README.md (section "Compatible GPUs" to the end), commit 9d0b0414a5304c3679c5db9d44d2afba8e58cc1b (2024-12-05)
  - 570 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 570.211.01 README.md (section "Compatible GPUs" to the end), commit 498793d5e2a86c981b83c1bfb31f1f4a082d0f7b (2026-01-13)
  - 575 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 575.64.05 README.md (section "Compatible GPUs" to the end), commit d89031330084ad34dbfe15997454a4bb1674e0b1 (2025-07-22)
  - 580 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 580.142 README.md (section "Compatible GPUs" to the end), commit 1a5075f82128be3603d4a4657c7b689234306778 (2026-03-10)
  - 590 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 590.48.01 README.md (section "Compatible GPUs" to the end), commit 2ccbad25e1af6a6ee6f38cf569f89f8b65d658ab (2025-12-18)
  - 595 open modules' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 595.45.04 README.md (section "Compatible GPUs" to the end), commit df1c9a3de2be4b130f4fc7680f7198193d8ac6ad (2026-03-05)
  - pci.ids (vendor 10de, extract): pciutils/pciids master, pci.ids Version 2026.08.22 pci.ids (vendor 10de device lines), commit c1c12547d626ebf05fd0223144ad87fab5e95d06 (2026-08-22)
  - gpu-admin-tools product names and chip ranges (extract): NVIDIA/gpu-admin-tools tag v2025.10.20 gpu/devid_names.py and gpu/devid_chips.py, commit 82422cc1811cf7d04b69733cef3fa46e4144e203 (2025-10-21)

GPUS maps a PCI device id (vendor 0x10de) to (name, flavors, legacy, first):
  flavors -- kernel modules NVIDIA supports on the id: "open" (only the open modules:
             Blackwell and later, Grace Hopper), "either", "proprietary" (not the open ones)
  legacy  -- last driver branch supporting the id ("470"), "" when current branches do
  first   -- first branch whose list names the id ("570"), "" when the oldest input
             already did

It is built from _PACKED (ids NVIDIA's lists name) and _BY_CHIP (the other ids of the chips
those lists support, named by pci.ids or NVIDIA's gpu-admin-tools: each takes the row its
chip's listed ids share, and BY_CHIP holds them): for each (flavors, legacy, first), items
"<ids>=<name>" separated by "; ", <ids> the device ids (4 hex digits, comma-separated)
sharing that name. To find an id, search for its 4 digits (e.g. 2330).

CHIPS maps every GPU id of pci.ids and of the lists to its chip ("0x2330": "GH100"), and
ARCHITECTURES each chip to its architecture ("GH100": "Hopper"); built from _CHIP_IDS.
"""

DRIVER = '595.45.04'
SOURCES = (
    '510 supported-gpus.json: alex-tu-cc/get-nvidia-supported-gpus-json gh-pages bionic-nvidia-driver-510-supported-gpus.json, commit d67e961e5fd85a02745052acfd13fc24e8449d60 (2022-12-02)',
    '515 supported-gpus.json: alex-tu-cc/get-nvidia-supported-gpus-json gh-pages bionic-nvidia-driver-515-supported-gpus.json, commit d67e961e5fd85a02745052acfd13fc24e8449d60 (2022-12-02)',
    '525 supported-gpus.json: alex-tu-cc/get-nvidia-supported-gpus-json gh-pages focal-nvidia-driver-525-supported-gpus.json, commit 40678c28e943cf34be39ee436b7a3cddf21bfebf (2023-03-22)',
    "590 supported-gpus.json (extract): megvadulthangya/nvidia-driver-assistant (a copy of NVIDIA's nvidia-driver-assistant_0.23.48.01-1_all.deb) package 0.23.48.01-1 /usr/share/nvidia-driver-assistant/supported-gpus/supported-gpus.json, commit 407f8074002cf020eb0817b63ad4f9d7ca2b1fd6 (2025-12-08)",
    '525 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 525.147.05 README.md (section "Compatible GPUs" to the end), commit 207a166fc33db90b5bc21395f8d6b5489603ac10 (2023-10-31)',
    '535 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 535.288.01 README.md (section "Compatible GPUs" to the end), commit ef65a1309711a38041ece7ac3467d30a6e256d85 (2026-01-13)',
    '545 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 545.29.06 README.md (section "Compatible GPUs" to the end), commit 4c29105335610933e744f4ab2524ea63fc39edaf (2023-11-21)',
    '550 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 550.163.01 README.md (section "Compatible GPUs" to the end), commit 23e9e7621487fe632040a370249f690a456967dd (2025-04-17)',
    '555 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 555.58.02 README.md (section "Compatible GPUs" to the end), commit 1795a8bb20fe09f9939ca3e82d76791f5741e467 (2024-07-01)',
    '560 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 560.35.03 README.md (section "Compatible GPUs" to the end), commit ed4be649623435ebb04f5e93f859bf46d977daa4 (2024-08-19)',
    '565 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 565.77 README.md (section "Compatible GPUs" to the end), commit 9d0b0414a5304c3679c5db9d44d2afba8e58cc1b (2024-12-05)',
    '570 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 570.211.01 README.md (section "Compatible GPUs" to the end), commit 498793d5e2a86c981b83c1bfb31f1f4a082d0f7b (2026-01-13)',
    '575 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 575.64.05 README.md (section "Compatible GPUs" to the end), commit d89031330084ad34dbfe15997454a4bb1674e0b1 (2025-07-22)',
    '580 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 580.142 README.md (section "Compatible GPUs" to the end), commit 1a5075f82128be3603d4a4657c7b689234306778 (2026-03-10)',
    '590 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 590.48.01 README.md (section "Compatible GPUs" to the end), commit 2ccbad25e1af6a6ee6f38cf569f89f8b65d658ab (2025-12-18)',
    '595 open modules\' Compatible GPUs: NVIDIA/open-gpu-kernel-modules tag 595.45.04 README.md (section "Compatible GPUs" to the end), commit df1c9a3de2be4b130f4fc7680f7198193d8ac6ad (2026-03-05)',
    'pci.ids (vendor 10de, extract): pciutils/pciids master, pci.ids Version 2026.08.22 pci.ids (vendor 10de device lines), commit c1c12547d626ebf05fd0223144ad87fab5e95d06 (2026-08-22)',
    'gpu-admin-tools product names and chip ranges (extract): NVIDIA/gpu-admin-tools tag v2025.10.20 gpu/devid_names.py and gpu/devid_chips.py, commit 82422cc1811cf7d04b69733cef3fa46e4144e203 (2025-10-21)',
)

_PACKED = {
    ('open', '', '535'): (
        '2342=NVIDIA GH200 120GB; '
    ),
    ('open', '', '565'): (
        '2348=NVIDIA GH200 144G HBM3e; '
    ),
    ('open', '', '570'): (
        '2901=NVIDIA B200; 2941=NVIDIA GB200; 2b85=NVIDIA GeForce RTX 5090; 2b87=NVIDIA GeForce RTX 5090 D; '
        '2bb1=NVIDIA RTX PRO 6000 Blackwell Workstation Edition; 2bb3=NVIDIA RTX PRO 5000 Blackwell; '
        '2bb4=NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition; 2c02=NVIDIA GeForce RTX 5080; '
        '2c05=NVIDIA GeForce RTX 5070 Ti; 2c18,2c58=NVIDIA GeForce RTX 5090 Laptop GPU; '
        '2c19,2c59=NVIDIA GeForce RTX 5080 Laptop GPU; 2c31=NVIDIA RTX PRO 4500 Blackwell; '
        '2c33=NVIDIA RTX PRO 4000 Blackwell SFF Edition; 2c34=NVIDIA RTX PRO 4000 Blackwell; '
        '2c38=NVIDIA RTX PRO 5000 Blackwell Generation Laptop GPU; '
        '2c39=NVIDIA RTX PRO 4000 Blackwell Generation Laptop GPU; 2c79=NVIDIA RTX PRO 4000 Blackwell Embedded GPU; '
        '2d04=NVIDIA GeForce RTX 5060 Ti; 2d05=NVIDIA GeForce RTX 5060; '
        '2d18,2d58=NVIDIA GeForce RTX 5070 Laptop GPU; 2d19,2d59=NVIDIA GeForce RTX 5060 Laptop GPU; '
        '2d30=NVIDIA RTX PRO 2000 Blackwell; 2d39=NVIDIA RTX PRO 2000 Blackwell Generation Laptop GPU; '
        '2d79=NVIDIA RTX PRO 2000 Blackwell Embedded GPU; 2d98,2dd8=NVIDIA GeForce RTX 5050 Laptop GPU; '
        '2db8=NVIDIA RTX PRO 1000 Blackwell Generation Laptop GPU; '
        '2db9=NVIDIA RTX PRO 500 Blackwell Generation Laptop GPU; 2df9=NVIDIA RTX PRO 500 Blackwell Embedded GPU; '
        '2f04=NVIDIA GeForce RTX 5070; 2f18,2f58=NVIDIA GeForce RTX 5070 Ti Laptop GPU; '
        '2f38=NVIDIA RTX PRO 3000 Blackwell Generation Laptop GPU; '
    ),
    ('open', '', '575'): (
        '2bb5=NVIDIA RTX PRO 6000 Blackwell Server Edition; 2d83=NVIDIA GeForce RTX 5050; '
    ),
    ('open', '', '580'): (
        '29bb=NVIDIA DRIVE P2021; 2b8c=NVIDIA GeForce RTX 5090 D v2; 2bb9=NVIDIA RTX 6000D; '
        '2c3a=NVIDIA RTX PRO 4500 Blackwell Server Edition; 2c77=NVIDIA RTX PRO 5000 Blackwell Embedded GPU; '
        '2e12=NVIDIA GB10; 3182=NVIDIA B300 SXM6 AC; 31c2=NVIDIA GB300; '
    ),
    ('either', '', ''): (
        '1e02=NVIDIA TITAN RTX; 1e04,1e07=NVIDIA GeForce RTX 2080 Ti; 1e09=NVIDIA CMP 50HX; '
        '1e30,1e36=Quadro RTX 6000; 1e78=Quadro RTX 8000; 1e81=NVIDIA GeForce RTX 2080 SUPER; '
        '1e82,1e87,1e90,1ed0=NVIDIA GeForce RTX 2080; 1e84,1ec2,1ec7=NVIDIA GeForce RTX 2070 SUPER; '
        '1e89,1f03,1f08,1f11,1f12,1f15,1f51,1f55=NVIDIA GeForce RTX 2060; 1e91,1ed1=NVIDIA GeForce RTX 2070 Super; '
        '1e93,1ed3=NVIDIA GeForce RTX 2080 Super; 1eb0,1eb5,1ef5=Quadro RTX 5000; 1eb1,1eb6=Quadro RTX 4000; '
        '1f02,1f07,1f10,1f14,1f50,1f54=NVIDIA GeForce RTX 2070; 1f06,1f42,1f47=NVIDIA GeForce RTX 2060 SUPER; '
        '1f0a,1f82,1f91,1f96,1f99,1f9d,1fdd,2188=NVIDIA GeForce GTX 1650; 1f0b=NVIDIA CMP 40HX; '
        '1f36,1f76=Quadro RTX 3000; 1f83=NVIDIA GeForce GTX 1630; 1f95,2192=NVIDIA GeForce GTX 1650 Ti; '
        '1f97,1f98,1f9c=NVIDIA GeForce MX450; 1f9f,1fa0=NVIDIA GeForce MX550; 1fb0=NVIDIA T1000; 1fb1=NVIDIA T600; '
        '1fb2=NVIDIA T400; 1fb6,1fba=NVIDIA T600 Laptop GPU; 1fb7=NVIDIA T550 Laptop GPU; 1fb8=Quadro T2000; '
        '1fb9,1ff9=Quadro T1000; 1fbb=NVIDIA T500; 1fbc=NVIDIA T1200 Laptop GPU; 1ff0=NVIDIA T1000 8GB; '
        '1ff2=NVIDIA T400 4GB; 20b0=NVIDIA A100-SXM4-40GB; 20b2=NVIDIA A100-SXM4-80GB; 20b3=NVIDIA A100-SXM-64GB; '
        '20b5=NVIDIA A100 80GB PCIe; 20b6=NVIDIA PG506-232; 20b7=NVIDIA A30; 20f1=NVIDIA A100-PCIE-40GB; '
        '20f3=NVIDIA A800-SXM4-80GB; 20f5=NVIDIA A800 80GB PCIe; 20f6=NVIDIA A800 40GB Active; '
        '2182,2191,21d1=NVIDIA GeForce GTX 1660 Ti; 2184=NVIDIA GeForce GTX 1660; '
        '2187=NVIDIA GeForce GTX 1650 SUPER; 2189=NVIDIA CMP 30HX; 21c4=NVIDIA GeForce GTX 1660 SUPER; '
        '2203=NVIDIA GeForce RTX 3090 Ti; 2204=NVIDIA GeForce RTX 3090; 2206,220a,2216=NVIDIA GeForce RTX 3080; '
        '2207,2482=NVIDIA GeForce RTX 3070 Ti; 2208=NVIDIA GeForce RTX 3080 Ti; 220d=NVIDIA CMP 90HX; '
        '2230=NVIDIA RTX A6000; 2231=NVIDIA RTX A5000; 2232=NVIDIA RTX A4500; 2233=NVIDIA RTX A5500; '
        '2235=NVIDIA A40; 2236=NVIDIA A10; 2237=NVIDIA A10G; 2238=NVIDIA A10M; '
        '2414,2486,2489,24c9=NVIDIA GeForce RTX 3060 Ti; 2420,2460=NVIDIA GeForce RTX 3080 Ti Laptop GPU; '
        '2438=NVIDIA RTX A5500 Laptop GPU; 2484,2488=NVIDIA GeForce RTX 3070; '
        '2487,2503,2504,2544=NVIDIA GeForce RTX 3060; 248a=NVIDIA CMP 70HX; '
        '249c,24dc=NVIDIA GeForce RTX 3080 Laptop GPU; 249d,24dd=NVIDIA GeForce RTX 3070 Laptop GPU; '
        '24a0,24e0=NVIDIA GeForce RTX 3070 Ti Laptop GPU; 24b0=NVIDIA RTX A4000; 24b1=NVIDIA RTX A4000H; '
        '24b6=NVIDIA RTX A5000 Laptop GPU; 24b7=NVIDIA RTX A4000 Laptop GPU; 24b8=NVIDIA RTX A3000 Laptop GPU; '
        '24b9,24bb=NVIDIA RTX A3000 12GB Laptop GPU; 24ba=NVIDIA RTX A4500 Laptop GPU; '
        '24fa=NVIDIA RTX A4500 Embedded GPU; 2507=NVIDIA GeForce RTX 3050; 2508=NVIDIA GeForce RTX 3050 OEM; '
        '2520,2521,2560=NVIDIA GeForce RTX 3060 Laptop GPU; '
        '2523,2563,25a0,25e0=NVIDIA GeForce RTX 3050 Ti Laptop GPU; 2531=NVIDIA RTX A2000; '
        '2571=NVIDIA RTX A2000 12GB; 25a2,25a5,25e2,25e5=NVIDIA GeForce RTX 3050 Laptop GPU; '
        '25a6=NVIDIA GeForce MX570; 25a7,25a9=NVIDIA GeForce RTX 2050; 25aa=NVIDIA GeForce MX570 A; 25b6=NVIDIA A16; '
        '25b8=NVIDIA RTX A2000 Laptop GPU; 25b9=NVIDIA RTX A1000 Laptop GPU; 25ba=NVIDIA RTX A2000 8GB Laptop GPU; '
        '25bb=NVIDIA RTX A500 Laptop GPU; 25f9=NVIDIA RTX A1000 Embedded GPU; 25fa=NVIDIA RTX A2000 Embedded GPU; '
    ),
    ('either', '', '525'): (
        '2322=NVIDIA H800 PCIe; 2324=NVIDIA H800; 2330=NVIDIA H100 80GB HBM3; 2331=NVIDIA H100 PCIe; '
        '2339=NVIDIA H100; 24c7=NVIDIA GeForce RTX 3060; 2582=NVIDIA GeForce RTX 3050; '
        '25ab=NVIDIA GeForce RTX 3050 4GB Laptop GPU; 25ac,25ec=NVIDIA GeForce RTX 3050 6GB Laptop GPU; '
        '25ad,25ed=NVIDIA GeForce RTX 2050; 25bc=NVIDIA RTX A1000 6GB Laptop GPU; 25bd=NVIDIA RTX A500 Laptop GPU; '
        '25fb=NVIDIA RTX A500 Embedded GPU; 2684=NVIDIA GeForce RTX 4090; 26b1=NVIDIA RTX 6000 Ada Generation; '
        '26b5=NVIDIA L40; 2704=NVIDIA GeForce RTX 4080; 2717,2757=NVIDIA GeForce RTX 4090 Laptop GPU; '
        '2730=NVIDIA RTX 5000 Ada Generation Laptop GPU; 2770=NVIDIA RTX 5000 Ada Generation Embedded GPU; '
        '2782=NVIDIA GeForce RTX 4070 Ti; 2786=NVIDIA GeForce RTX 4070; '
        '27a0,27e0=NVIDIA GeForce RTX 4080 Laptop GPU; 27b0=NVIDIA RTX 4000 SFF Ada Generation; 27b8=NVIDIA L4; '
        '27ba=NVIDIA RTX 4000 Ada Generation Laptop GPU; 27bb=NVIDIA RTX 3500 Ada Generation Laptop GPU; '
        '2803,2805=NVIDIA GeForce RTX 4060 Ti; 2820,2860=NVIDIA GeForce RTX 4070 Laptop GPU; '
        '2838=NVIDIA RTX 3000 Ada Generation Laptop GPU; 2882=NVIDIA GeForce RTX 4060; '
        '28a0,28e0=NVIDIA GeForce RTX 4060 Laptop GPU; 28a1,28e1=NVIDIA GeForce RTX 4050 Laptop GPU; '
        '28b8=NVIDIA RTX 2000 Ada Generation Laptop GPU; 28f8=NVIDIA RTX 2000 Ada Generation Embedded GPU; '
    ),
    ('either', '', '535'): (
        '20bd=NVIDIA A800-SXM4-40GB; 20fd=NVIDIA AX800; 2321=NVIDIA H100 NVL; 2329=NVIDIA H20; 232c=NVIDIA H20-3e; '
        '233a=NVIDIA H800 NVL; 2584=NVIDIA GeForce RTX 3050; 26b2=NVIDIA RTX 5000 Ada Generation; '
        '26b3=NVIDIA RTX 5880 Ada Generation; 26b9=NVIDIA L40S; 26ba=NVIDIA L20; '
        '27b1=NVIDIA RTX 4500 Ada Generation; 27b2=NVIDIA RTX 4000 Ada Generation; 27b6=NVIDIA L2; '
        '27fb=NVIDIA RTX 3500 Ada Generation Embedded GPU; 28b9=NVIDIA RTX 1000 Ada Generation Laptop GPU; '
        '28ba,28bb=NVIDIA RTX 500 Ada Generation Laptop GPU; '
    ),
    ('either', '', '550'): (
        '2335=NVIDIA H200; 25b0=NVIDIA RTX A1000; 25b2=NVIDIA RTX A400; 2685=NVIDIA GeForce RTX 4090 D; '
        '2702=NVIDIA GeForce RTX 4080 SUPER; 2705=NVIDIA GeForce RTX 4070 Ti SUPER; 2709=NVIDIA GeForce RTX 4070; '
        '2783=NVIDIA GeForce RTX 4070 SUPER; 2788=NVIDIA GeForce RTX 4060 Ti; 2808=NVIDIA GeForce RTX 4060; '
        '2822,28a3,28e3=NVIDIA GeForce RTX 3050 A Laptop GPU; 28b0=NVIDIA RTX 2000 Ada Generation; '
    ),
    ('either', '', '555'): (
        '2689=NVIDIA GeForce RTX 4070 Ti SUPER; '
    ),
    ('either', '', '565'): (
        '233b=NVIDIA H200 NVL; '
    ),
    ('either', '', '575'): (
        '1eb8=Tesla T4; '
    ),
    ('either', '', '580'): (
        '230e=NVIDIA H20 NVL16; '
    ),
    ('proprietary', '173.14', ''): (
        '00fa=GeForce PCX 5750; 00fb=GeForce PCX 5900; 00fc=Quadro FX 330/GeForce PCX 5300; '
        '00fd=Quadro FX 330/Quadro NVS 280 PCI-E; 00fe=Quadro FX 1300; 0301=GeForce FX 5800 Ultra; '
        '0302=GeForce FX 5800; 0308=Quadro FX 2000; 0309=Quadro FX 1000; 0311=GeForce FX 5600 Ultra; '
        '0312=GeForce FX 5600; 0314=GeForce FX 5600XT; 031a=GeForce FX Go5600; 031b=GeForce FX Go5650; '
        '031c=Quadro FX Go700; 0320,0322=GeForce FX 5200; 0321=GeForce FX 5200 Ultra; 0323=GeForce FX 5200LE; '
        '0324=GeForce FX Go5200; 0325=GeForce FX Go5250; 0326=GeForce FX 5500; 0327=GeForce FX 5100; '
        '0328=GeForce FX Go5200 32M/64M; 032a=Quadro NVS 55/280 PCI; 032b=Quadro FX 500/FX 600; '
        '032c=GeForce FX Go53xx; 032d=GeForce FX Go5100; 0330=GeForce FX 5900 Ultra; 0331=GeForce FX 5900; '
        '0332=GeForce FX 5900XT; 0333=GeForce FX 5950 Ultra; 0334=GeForce FX 5900ZT; 0338=Quadro FX 3000; '
        '033f=Quadro FX 700; 0341=GeForce FX 5700 Ultra; 0342=GeForce FX 5700; 0343=GeForce FX 5700LE; '
        '0344=GeForce FX 5700VE; 0347,0348=GeForce FX Go5700; 034c=Quadro FX Go1000; 034e=Quadro FX 1100; '
    ),
    ('proprietary', '304', ''): (
        '0040,00f9=GeForce 6800 Ultra; 0041,00c1,0211=GeForce 6800; 0042,00c2,0212=GeForce 6800 LE; '
        '0043=GeForce 6800 XE; 0044,0048,00c3,0218=GeForce 6800 XT; 0045,0046,0215=GeForce 6800 GT; '
        '0047,00c0,00f6=GeForce 6800 GS; 004e=Quadro FX 4000; 0090,0091=GeForce 7800 GTX; 0092=GeForce 7800 GT; '
        '0093,00f5=GeForce 7800 GS; 0095=GeForce 7800 SLI; 0098=GeForce Go 7800; 0099=GeForce Go 7800 GTX; '
        '009d=Quadro FX 4500; 00c8=GeForce Go 6800; 00c9=GeForce Go 6800 Ultra; 00cc=Quadro FX Go1400; '
        '00cd=Quadro FX 3450/4000 SDI; 00ce=Quadro FX 1400; 00f1,0140=GeForce 6600 GT; 00f2,0141=GeForce 6600; '
        '00f3,014f,0221=GeForce 6200; 00f4,0142=GeForce 6600 LE; 00f8=Quadro FX 3400/Quadro FX 4000; '
        '0143=GeForce 6600 VE; 0144,0148=GeForce Go 6600; 0145=GeForce 6610 XL; 0146=GeForce Go 6600 TE/6200 TE; '
        '0147=GeForce 6700 XL; 0149=GeForce Go 6600 GT; 014a=Quadro NVS 440; 014c=Quadro FX 540M; '
        '014d=Quadro FX 550; 014e=Quadro FX 540; 0160=GeForce 6500; 0161=GeForce 6200 TurboCache(TM); '
        '0162=GeForce 6200SE TurboCache(TM); 0163=GeForce 6200 LE; 0164,0167=GeForce Go 6200; 0165=Quadro NVS 285; '
        '0166,0168=GeForce Go 6400; 0169=GeForce 6250; 016a=GeForce 7100 GS; 01d0=GeForce 7350 LE; '
        '01d1=GeForce 7300 LE; 01d2=GeForce 7550 LE; 01d3=GeForce 7300 SE/7200 GS; 01d6=GeForce Go 7200; '
        '01d7=GeForce Go 7300; 01d8=GeForce Go 7400; 01da=Quadro NVS 110M; 01db=Quadro NVS 120M; '
        '01dc=Quadro FX 350M; 01dd=GeForce 7500 LE; 01de=Quadro FX 350; 01df=GeForce 7300 GS; '
        '0222=GeForce 6200 A-LE; 0240=GeForce 6150; 0241=GeForce 6150 LE; 0242=GeForce 6100; 0244=GeForce Go 6150; '
        '0245=Quadro NVS 210S / GeForce 6150LE; 0247=GeForce Go 6100; 0290=GeForce 7900 GTX; '
        '0291=GeForce 7900 GT/GTO; 0292,02e3=GeForce 7900 GS; 0293,0294=GeForce 7950 GX2; 0295,02e4=GeForce 7950 GT; '
        '0297=GeForce Go 7950 GTX; 0298=GeForce Go 7900 GS; 0299=Quadro NVS 510M; 029a=Quadro FX 2500M; '
        '029b=Quadro FX 1500M; 029c=Quadro FX 5500; 029d=Quadro FX 3500; 029e=Quadro FX 1500; '
        '029f=Quadro FX 4500 X2; 02e0,0391=GeForce 7600 GT; 02e1,0392=GeForce 7600 GS; '
        '02e2,0393,0395=GeForce 7300 GT; 038b,0390=GeForce 7650 GS; 0394=GeForce 7600 LE; 0397=GeForce Go 7700; '
        '0398=GeForce Go 7600; 0399=GeForce Go 7600 GT; 039c=Quadro FX 560M; 039e=Quadro FX 560; '
        '03d0=GeForce 6150SE nForce 430; 03d1=GeForce 6100 nForce 405; 03d2=GeForce 6100 nForce 400; '
        '03d5=GeForce 6100 nForce 420; 03d6,053e=GeForce 7025 / nForce 630a; 0531=GeForce 7150M / nForce 630M; '
        '0533=GeForce 7000M / nForce 610M; 053a,053b=GeForce 7050 PV / nForce 630a; 07e0=GeForce 7150 / nForce 630i; '
        '07e1=GeForce 7100 / nForce 630i; 07e2=GeForce 7050 / nForce 630i; 07e3=GeForce 7050 / nForce 610i; '
        '07e5=GeForce 7050 / nForce 620i; '
    ),
    ('proprietary', '340', ''): (
        '0191=GeForce 8800 GTX; 0193=GeForce 8800 GTS; 0194=GeForce 8800 Ultra; 0197=Tesla C870; '
        '019d=Quadro FX 5600; 019e=Quadro FX 4600; 0400=GeForce 8600 GTS; 0401,0402=GeForce 8600 GT; '
        '0403=GeForce 8600 GS; 0404,0422,0424,06e4=GeForce 8400 GS; 0405=GeForce 9500M GS; '
        '0406,0423=GeForce 8300 GS; 0407=GeForce 8600M GT; 0408=GeForce 9650M GS; 0409=GeForce 8700M GT; '
        '040a=Quadro FX 370; 040b=Quadro NVS 320M; 040c=Quadro FX 570M; 040d=Quadro FX 1600M; 040e=Quadro FX 570; '
        '040f=Quadro FX 1700; 0410,0ca0,0ca7=GeForce GT 330; 0420,06e3=GeForce 8400 SE; 0421=GeForce 8500 GT; '
        '0425=GeForce 8600M GS; 0426=GeForce 8400M GT; 0427=GeForce 8400M GS; 0428=GeForce 8400M G; '
        '0429=Quadro NVS 140M; 042a=Quadro NVS 130M; 042b=Quadro NVS 135M; 042c,0641,065b=GeForce 9400 GT; '
        '042d=Quadro FX 360M; 042e=GeForce 9300M G; 042f=Quadro NVS 290; 05e0,05eb=GeForce GTX 295; '
        '05e1=GeForce GTX 280; 05e2,05ea=GeForce GTX 260; 05e3=GeForce GTX 285; 05e6=GeForce GTX 275; '
        '05e7=Tesla C1060; 05ed=Quadroplex 2200 D2; 05f8=Quadroplex 2200 S4; 05f9=Quadro CX; 05fd=Quadro FX 5800; '
        '05fe=Quadro FX 4800; 05ff=Quadro FX 3800; 0600=GeForce 8800 GTS 512; 0601,0605,0614=GeForce 9800 GT; '
        '0602,0611=GeForce 8800 GT; 0603,0621=GeForce GT 230; 0604=GeForce 9800 GX2; 0606,060d=GeForce 8800 GS; '
        '0607=GeForce GTS 240; 0608,0617=GeForce 9800M GTX; 0609=GeForce 8800M GTS; 060a=GeForce GTX 280M; '
        '060b=GeForce 9800M GT; 060c=GeForce 8800M GTX; 060f=GeForce GTX 285M; 0610,0635=GeForce 9600 GSO; '
        '0612=GeForce 9800 GTX/9800 GTX+; 0613=GeForce 9800 GTX+; 0615=GeForce GTS 250; 0618=GeForce GTX 260M; '
        '0619=Quadro FX 4700 X2; 061a=Quadro FX 3700; 061b=Quadro VX 200; 061c=Quadro FX 3600M; '
        '061d=Quadro FX 2800M; 061e=Quadro FX 3700M; 061f=Quadro FX 3800M; 0622,062d,062e,0637=GeForce 9600 GT; '
        '0623=GeForce 9600 GS; 0625=GeForce 9600 GSO 512; 0626=GeForce GT 130; 0627=GeForce GT 140; '
        '0628,062c=GeForce 9800M GTS; 062a=GeForce 9700M GTS; 062b=GeForce 9800M GS; 0630=GeForce 9700 S; '
        '0631=GeForce GTS 160M; 0632=GeForce GTS 150M; 0638=Quadro FX 1800; 063a=Quadro FX 2700M; '
        '0640,0643=GeForce 9500 GT; 0644,0645=GeForce 9500 GS; 0646,0655,0656=GeForce GT 120; '
        '0647,0649=GeForce 9600M GT; 0648=GeForce 9600M GS; 064a=GeForce 9700M GT; 064b=GeForce 9500M G; '
        '064c=GeForce 9650M GT; 0651=GeForce G 110M; 0652=GeForce GT 130M; 0653=GeForce GT 120M; '
        '0654=GeForce GT 220M; 0658=Quadro FX 380; 0659=Quadro FX 580; 065a=Quadro FX 1700M; 065c=Quadro FX 770M; '
        '06e0=GeForce 9300 GE; 06e1,10c0=GeForce 9300 GS; 06e2=GeForce 8400; 06e5,06e9=GeForce 9300M GS; '
        '06e6=GeForce G100; 06e7=GeForce 9300 SE; 06e8=GeForce 9200M GS; 06ea=Quadro NVS 150M; 06eb=Quadro NVS 160M; '
        '06ec=GeForce G 105M; 06ef=GeForce G 103M; 06f1,0a68,0a69=GeForce G105M; 06f8=Quadro NVS 420; '
        '06f9=Quadro FX 370 LP; 06fa=Quadro NVS 450; 06fb=Quadro FX 370M; 06fd=Quadro NVS 295; '
        '06ff=HICx16 + Graphics; 0840=GeForce 8200M; 0844,086e=GeForce 9100M G; 0845,086f=GeForce 8200M G; '
        '0846,084b,086d,0871=GeForce 9200; 0847=GeForce 9100; 0848=GeForce 8300; 0849=GeForce 8200; '
        '084a=nForce 730a; 084c=nForce 980a/780a SLI; 084d=nForce 750a SLI; 084f=GeForce 8100 / nForce 720a; '
        '0860,0861,0867,0869,086a,087a=GeForce 9400; 0862,0866=GeForce 9400M G; 0863,0870=GeForce 9400M; '
        '0864=GeForce 9300; 0865,0874,0876,087d=ION; 0868=nForce 760i SLI; 086c=GeForce 9300 / nForce 730i; '
        '0872,0873=GeForce G102M; 087e,087f=ION LE; 08a0,08a2,08a3,08a4,08a5=GeForce 320M; '
        '0a20,0ca5,0cac=GeForce GT 220; 0a22,0a67=GeForce 315; 0a23,0a65=GeForce 210; 0a26,0a27,10c5=GeForce 405; '
        '0a28,0a2a=GeForce GT 230M; 0a29,0a2b=GeForce GT 330M; 0a2c=NVS 5100M; 0a2d=GeForce GT 320M; '
        '0a32=GeForce GT 415; 0a34=GeForce GT 240M; 0a35=GeForce GT 325M; 0a38=Quadro 400; 0a3c=Quadro FX 880M; '
        '0a60=GeForce G210; 0a62=GeForce 205; 0a63,0a66=GeForce 310; 0a64,0a6f,0a76=Second Generation ION; '
        '0a6a=NVS 2100M; 0a6c=NVS 3100M; 0a6e,0a71,0a73=GeForce 305M; 0a70,0a72,0a75=GeForce 310M; '
        '0a74=GeForce G210M; 0a78=Quadro FX 380 LP; 0a7a=GeForce 315M; 0a7c=Quadro FX 380M; 0ca2=GeForce GT 320; '
        '0ca3=GeForce GT 240; 0ca4=GeForce GT 340; 0ca8=GeForce GTS 260M; 0ca9=GeForce GTS 250M; '
        '0caf=GeForce GT 335M; 0cb0=GeForce GTS 350M; 0cb1=GeForce GTS 360M; 0cbc=Quadro FX 1800M; '
        '10c3=GeForce 8400GS; 10d8=NVS 300; '
    ),
    ('proprietary', '367', ''): (
        '0fef=GRID K340; 0ff2=GRID K1; 11bf=GRID K2; '
    ),
    ('proprietary', '390', ''): (
        '06c0=GeForce GTX 480; 06c4=GeForce GTX 465; 06ca=GeForce GTX 480M; 06cd=GeForce GTX 470; '
        '06d1=Tesla C2050 / C2070; 06d2=Tesla M2070; 06d8,06dc=Quadro 6000; 06d9=Quadro 5000; 06da=Quadro 5000M; '
        '06dd=Quadro 4000; 06de=Tesla T20 Processor; 06df=Tesla M2070-Q; 0dc0,0de0=GeForce GT 440; '
        '0dc4,0dc5,0dc6,1245,1249=GeForce GTS 450; 0dcd,0dce,0deb,1247,1248,124d=GeForce GT 555M; '
        '0dd1=GeForce GTX 460M; 0dd2=GeForce GT 445M; 0dd3,0df2=GeForce GT 435M; 0dd6,0df6,1246=GeForce GT 550M; '
        '0dd8=Quadro 2000; 0dda=Quadro 2000M; 0de1=GeForce GT 430; 0de2=GeForce GT 420; 0de3=GeForce GT 635M; '
        '0de4,1040=GeForce GT 520; 0de5=GeForce GT 530; 0de7,0f03,104a=GeForce GT 610; 0de8=GeForce GT 620M; '
        '0de9=GeForce GT 630M; 0dea,1058,1059,105a=GeForce 610M; 0dec,0df5=GeForce GT 525M; '
        '0ded,0df7,1050,1052=GeForce GT 520M; 0dee=GeForce GT 415M; 0def=NVS 5400M; 0df0=GeForce GT 425M; '
        '0df1,0df3=GeForce GT 420M; 0df4=GeForce GT 540M; 0df8=Quadro 600; 0df9=Quadro 500M; 0dfa=Quadro 1000M; '
        '0dfc=NVS 5200M; 0e22,0e24=GeForce GTX 460; 0e23=GeForce GTX 460 SE; 0e30=GeForce GTX 470M; '
        '0e31=GeForce GTX 485M; 0e3a=Quadro 3000M; 0e3b=Quadro 4000M; 0f00=GeForce GT 630; 0f01,1049=GeForce GT 620; '
        '0f02=GeForce GT 730; 1042=GeForce 510; 1048=GeForce 605; 104b=GeForce GT 625 (OEM); 104c=GeForce GT 705; '
        '1051=GeForce GT 520MX; 1054,1055=GeForce 410M; 1056,1057=NVS 4200M; 105b=GeForce 705M; 107c=NVS 315; '
        '107d=NVS 310; 1080,1089,108b=GeForce GTX 580; 1081,1086=GeForce GTX 570; 1082,1087,1200=GeForce GTX 560 Ti; '
        '1084,1201=GeForce GTX 560; 1088=GeForce GTX 590; 1091=Tesla M2090; 1094=Tesla M2075; 1096=Tesla C2075; '
        '109a=Quadro 5010M; 109b=Quadro 7000; 1140=GeForce 820M; 1203=GeForce GTX 460 SE v2; '
        '1205=GeForce GTX 460 v2; 1206=GeForce GTX 555; 1207=GeForce GT 645; 1208=GeForce GTX 560 SE; '
        '1210=GeForce GTX 570M; 1211=GeForce GTX 580M; 1212=GeForce GTX 675M; 1213=GeForce GTX 670M; '
        '1241,1243=GeForce GT 545; 1244=GeForce GTX 550 Ti; 124b=GeForce GT 640; 1251=GeForce GTX 560M; '
    ),
    ('proprietary', '470', ''): (
        '0fc6,11c8=GeForce GTX 650; 0fc8,11c5,11cb=GeForce GT 740; 0fc9,1287=GeForce GT 730; '
        '0fcd,0fea=GeForce GT 755M; 0fce,0fd3=GeForce GT 640M LE; 0fd1,0fd5=GeForce GT 650M; '
        '0fd2,0fd8=GeForce GT 640M; 0fd4,0fe0=GeForce GTX 660M; 0fd9=GeForce GT 645M; 0fdf,1292=GeForce GT 740M; '
        '0fe1,1290,1293=GeForce GT 730M; 0fe2,0fe3=GeForce GT 745M; 0fe4,0fe9=GeForce GT 750M; 0fec=GeForce 710A; '
        '0fed=GeForce 820M; 0fee=GeForce 810M; 0ff6=Quadro K1100M; 0ff8=Quadro K500M; 0ff9=Quadro K2000D; '
        '0ffa=Quadro K600; 0ffb=Quadro K2000M; 0ffc=Quadro K1000M; 0ffd=NVS 510; 0ffe=Quadro K2000; 0fff=Quadro 410; '
        '1001=GeForce GTX TITAN Z; 1004,1007=GeForce GTX 780; 1005=GeForce GTX TITAN; 1008,100a=GeForce GTX 780 Ti; '
        '100c=GeForce GTX TITAN Black; 1021=Tesla K20Xm; 1022=Tesla K20c; 1023=Tesla K40m; 1024=Tesla K40c; '
        '1026=Tesla K20s; 1027=Tesla K40st; 1028=Tesla K20m; 1029=Tesla K40s; 102a=Tesla K40t; 102d=Tesla K80; '
        '103a=Quadro K6000; 103c=Quadro K5200; 1180=GeForce GTX 680; 1183=GeForce GTX 660 Ti; 1184=GeForce GTX 770; '
        '1185,1195,11c0=GeForce GTX 660; 1187=GeForce GTX 760; 1188=GeForce GTX 690; 1189=GeForce GTX 670; '
        '118a=GRID K520; 118e=GeForce GTX 760 (192-bit); 118f=Tesla K10; 1193=GeForce GTX 760 Ti OEM; 1194=Tesla K8; '
        '1198=GeForce GTX 880M; 1199=GeForce GTX 870M; 119a=GeForce GTX 860M; 119d=GeForce GTX 775M; '
        '119e,119f=GeForce GTX 780M; 11a0=GeForce GTX 680M; 11a1=GeForce GTX 670MX; 11a2,11a7=GeForce GTX 675MX; '
        '11a3=GeForce GTX 680MX; 11b4=Quadro K4200; 11b6=Quadro K3100M; 11b7=Quadro K4100M; 11b8=Quadro K5100M; '
        '11ba=Quadro K5000; 11bc=Quadro K5000M; 11bd=Quadro K4000M; 11be=Quadro K3000M; '
        '11c2=GeForce GTX 650 Ti BOOST; 11c3,11c6=GeForce GTX 650 Ti; 11c4=GeForce GTX 645; 11e0=GeForce GTX 770M; '
        '11e1,11e2=GeForce GTX 765M; 11e3=GeForce GTX 760M; 11fa=Quadro K4000; 11fc=Quadro K2100M; '
        '1280=GeForce GT 635; 1281,1289,128b=GeForce GT 710; 1282=GeForce GT 640; 1284=GeForce GT 630; '
        '1286,1288=GeForce GT 720; 1291=GeForce GT 735M; 1295=GeForce 710M; 1296=GeForce 825M; 1298=GeForce GT 720M; '
        '1299=GeForce 920M; 129a=GeForce 910M; 12b9=Quadro K610M; 12ba=Quadro K510M; '
    ),
    ('proprietary', '580', ''): (
        '1340=NVIDIA GeForce 830M; 1341,1393=NVIDIA GeForce 840M; 1344,1390,1398=NVIDIA GeForce 845M; '
        '1346,1349=NVIDIA GeForce 930M; 1347,139c=NVIDIA GeForce 940M; 1348,1399=NVIDIA GeForce 945M; '
        '134b,134d,179c=NVIDIA GeForce 940MX; 134e=NVIDIA GeForce 930MX; 134f=NVIDIA GeForce 920MX; '
        '137a=NVIDIA N15M-Q3; 137b=Quadro M520; 137d=NVIDIA GeForce 940A; 1380,139d=NVIDIA GeForce GTX 750 Ti; '
        '1381,1407=NVIDIA GeForce GTX 750; 1382=NVIDIA GeForce GTX 745; 1391=NVIDIA GeForce GTX 850M; '
        '1392=NVIDIA GeForce GTX 860M; 139a=NVIDIA GeForce GTX 950M; 139b=NVIDIA GeForce GTX 960M; '
        '13b0=Quadro M2000M; 13b1=Quadro M1000M; 13b2=Quadro M600M; 13b3=Quadro K2200M; 13b4=Quadro M620; '
        '13b6=Quadro M1200; 13b9=NVS 810; 13ba=Quadro K2200; 13bb=Quadro K620; 13bc=Quadro K1200; '
        '13c0,13da,161a=NVIDIA GeForce GTX 980; 13c2=NVIDIA GeForce GTX 970; 13d7,1617=NVIDIA GeForce GTX 980M; '
        '13d8,1618=NVIDIA GeForce GTX 970M; 13d9,1427,1619,1667=NVIDIA GeForce GTX 965M; 13f0=Quadro M5000; '
        '13f1=Quadro M4000; 13f2=Tesla M60; 13f3=Tesla M6; 13f8=Quadro M5000M; 13f9=Quadro M4000M; '
        '13fa=Quadro M3000M; 13fb=Quadro M5500; 1401,1406=NVIDIA GeForce GTX 960; 1402=NVIDIA GeForce GTX 950; '
        '1430=Quadro M2000; 1431=Tesla M4; 1436=Quadro M2200; 15f0=Quadro GP100; 15f7=Tesla P100-PCIE-12GB; '
        '15f8=Tesla P100-PCIE-16GB; 15f9=Tesla P100-SXM2-16GB; 174d=NVIDIA GeForce MX130; 174e=NVIDIA GeForce MX110; '
        '17c2=NVIDIA GeForce GTX TITAN X; 17c8=NVIDIA GeForce GTX 980 Ti; 17f0=Quadro M6000; 17f1=Quadro M6000 24GB; '
        '17fd=Tesla M40; 1b00=NVIDIA TITAN X (Pascal); 1b02=NVIDIA TITAN Xp; 1b06=NVIDIA GeForce GTX 1080 Ti; '
        '1b30=Quadro P6000; 1b38=Tesla P40; 1b80,1ba0,1be0=NVIDIA GeForce GTX 1080; '
        '1b81,1ba1,1ba2,1be1=NVIDIA GeForce GTX 1070; 1b82=NVIDIA GeForce GTX 1070 Ti; '
        '1b83,1c03,1c06=NVIDIA GeForce GTX 1060 6GB; 1b84,1c02=NVIDIA GeForce GTX 1060 3GB; 1b87=NVIDIA P104-100; '
        '1bb0,1bb6=Quadro P5000; 1bb1,1bb7=Quadro P4000; 1bb3=Tesla P4; 1bb4=Tesla P6; 1bb5=Quadro P5200; '
        '1bb8=Quadro P3000; 1bb9=Quadro P4200; 1bbb=Quadro P3200; 1bc7=NVIDIA P104-101 (GP104); '
        '1c04=NVIDIA GeForce GTX 1060 5GB; 1c07=NVIDIA P106-100; 1c09=NVIDIA P106-090; '
        '1c20,1c23,1c60=NVIDIA GeForce GTX 1060; 1c21,1c61,1c82,1c8c,1c8f=NVIDIA GeForce GTX 1050 Ti; '
        '1c22,1c62,1c81,1c83,1c8d,1c91,1c92=NVIDIA GeForce GTX 1050; 1c30,1cba,1cfa=Quadro P2000; 1c31=Quadro P2200; '
        '1c90,1d10,1d12=NVIDIA GeForce MX150; 1c94,1c96=NVIDIA GeForce MX350; 1cb1,1cbb,1cfb=Quadro P1000; '
        '1cb2,1cbc=Quadro P600; 1cb3=Quadro P400; 1cb6,1cbd=Quadro P620; 1d01=NVIDIA GeForce GT 1030; '
        '1d02=NVIDIA GeForce GT 1010; 1d11=NVIDIA GeForce MX230; 1d13,1d52=NVIDIA GeForce MX250; '
        '1d16=NVIDIA GeForce MX330; 1d33=Quadro P500; 1d34=Quadro P520; 1d81=NVIDIA TITAN V; '
        '1db1,1df5=Tesla V100-SXM2-16GB; 1db3=Tesla V100-FHHL-16GB; 1db4=Tesla V100-PCIE-16GB; '
        '1db5=Tesla V100-SXM2-32GB; 1db6=Tesla V100-PCIE-32GB; 1db7=Tesla V100-DGXS-32GB; 1db8=Tesla V100-SXM3-32GB; '
        '1dba=Quadro GV100; 1df0=Tesla PG500-216; 1df2=Tesla PG503-216; 1df6=Tesla V100S-PCIE-32GB; '
    ),
    ('proprietary', '71.86', ''): (
        '0020=RIVA TNT; 0028=RIVA TNT2/TNT2 Pro; 0029=RIVA TNT2 Ultra; 002c=Vanta/Vanta LT; '
        '002d=RIVA TNT2 Model 64/Model 64 Pro; 00a0=Aladdin TNT2; 0100=GeForce 256; 0101=GeForce DDR; 0103=Quadro; '
        '0150=GeForce2 GTS/GeForce2 Pro; 0151=GeForce2 Ti; 0152=GeForce2 Ultra; 0153=Quadro2 Pro; '
    ),
    ('proprietary', '96.43', ''): (
        '0110=GeForce2 MX/MX 400; 0111=GeForce2 MX 100/200; 0112=GeForce2 Go; 0113=Quadro2 MXR/EX/Go; '
        '0170=GeForce4 MX 460; 0171=GeForce4 MX 440; 0172=GeForce4 MX 420; 0173=GeForce4 MX 440-SE; '
        '0174=GeForce4 440 Go; 0175=GeForce4 420 Go; 0176=GeForce4 420 Go 32M; 0177=GeForce4 460 Go; '
        '0178=Quadro4 550 XGL; 0179=GeForce4 440 Go 64M; 017a=Quadro NVS 400; 017c=Quadro4 500 GoGL; '
        '017d=GeForce4 410 Go 16M; 0181=GeForce4 MX 440 with AGP8X; 0182=GeForce4 MX 440SE with AGP8X; '
        '0183=GeForce4 MX 420 with AGP8X; 0185=GeForce4 MX 4000; 0188=Quadro4 580 XGL; 018a=Quadro NVS 280 SD; '
        '018b=Quadro4 380 XGL; 018c=Quadro NVS 50 PCI; 01a0=GeForce2 Integrated GPU; '
        '01f0=GeForce4 MX Integrated GPU; 0200=GeForce3; 0201=GeForce3 Ti 200; 0202=GeForce3 Ti 500; '
        '0203=Quadro DCC; 0250=GeForce4 Ti 4600; 0251=GeForce4 Ti 4400; 0253=GeForce4 Ti 4200; 0258=Quadro4 900 XGL; '
        '0259=Quadro4 750 XGL; 025b=Quadro4 700 XGL; 0280=GeForce4 Ti 4800; 0281=GeForce4 Ti 4200 with AGP8X; '
        '0282=GeForce4 Ti 4800 SE; 0286=GeForce4 4200 Go; 0288=Quadro4 980 XGL; 0289=Quadro4 780 XGL; '
        '028c=Quadro4 700 GoGL; '
    ),
}

_BY_CHIP = {
    ('open', '', '535'): (
        "2343=GH200 (GH100, not in NVIDIA's lists); 2345=GH200 / GH100-88K-A1 (GH100, not in NVIDIA's lists); "
    ),
    ('open', '', '570'): (
        "2900=Reserved Dev ID A (GB100, not in NVIDIA's lists); 2909=HGX B200 168GB (GB100, not in NVIDIA's lists); "
        "2920=TS4 / B100 (GB100, not in NVIDIA's lists); 2924,2925,293d,297e=GB100 (not in NVIDIA's lists); "
        "2940=Reserved Dev ID B (GB100, not in NVIDIA's lists); "
        "2bb2=RTX PRO 6000D Blackwell Workstation Edition (GB202, not in NVIDIA's lists); "
        "2bbc=RTX PRO 6000D Blackwell Max-Q Workstation Edition (GB202, not in NVIDIA's lists); "
        "2f06=GeForce RTX 5060 (GB205, not in NVIDIA's lists); "
    ),
    ('open', '', '580'): (
        "2980=Reserved Dev ID A (GB102, not in NVIDIA's lists); 29bc=B100 (GB102, not in NVIDIA's lists); "
        "29c0=Reserved Dev ID B (GB102, not in NVIDIA's lists); 29f1=GB102 (not in NVIDIA's lists); "
        "2e03=RTX Spark N1X (6144-core Blackwell RTX GPU) (GB20B, not in NVIDIA's lists); "
        "2e06=RTX Spark N1X (5120-core Blackwell RTX GPU) (GB20B, not in NVIDIA's lists); "
        "2e13=Desktop Device (GB20B, not in NVIDIA's lists); 2e2a=JMJWOA-Generic-GPU (GB20B, not in NVIDIA's lists); "
        "3180=Reserved Dev ID A (GB110, not in NVIDIA's lists); 31a1=GB300 MaxQ (GB110, not in NVIDIA's lists); "
        "31c0=Reserved Dev ID B (GB110, not in NVIDIA's lists); 31c3=GB300 (GB110, not in NVIDIA's lists); "
        "31fe=GB110 (not in NVIDIA's lists); "
    ),
    ('either', '', ''): (
        "1e03=GeForce RTX 2080 Ti 12GB (TU102, not in NVIDIA's lists); "
        "1e2d=GeForce RTX 2080 Ti Engineering Sample (TU102, not in NVIDIA's lists); "
        "1e2e=GeForce RTX 2080 Ti 12GB Engineering Sample (TU102, not in NVIDIA's lists); "
        "1e35=Tesla T10 (TU102, not in NVIDIA's lists); "
        "1e37=Tesla T10 16GB / GRID RTX T10-2/T10-4/T10-8 (TU102, not in NVIDIA's lists); "
        "1e38=Tesla T40 24GB (TU102, not in NVIDIA's lists); 1e3c,1e3d,1e3e=TU102 (not in NVIDIA's lists); "
        "1eab,1eb9,1ebe=TU104 (not in NVIDIA's lists); "
        "1eae=GeForce GTX 2080 Engineering Sample (TU104, not in NVIDIA's lists); "
        "1eb4=T4G (TU104, not in NVIDIA's lists); 1eba=PG189 SKU600 (TU104, not in NVIDIA's lists); "
        "1f04,1f2e=TU106 (not in NVIDIA's lists); 1f09=GeForce GTX 1660 SUPER (TU106, not in NVIDIA's lists); "
        "1f81,1fa1,1fae,1fbf=TU117 (not in NVIDIA's lists); "
        "1f92,1f94=GeForce GTX 1650 Mobile (TU117, not in NVIDIA's lists); "
        "1fd9=GeForce GTX 1650 Mobile Refresh (TU117, not in NVIDIA's lists); "
        "2080,2081,20b4,20ff=GA100 (not in NVIDIA's lists); 2082,20c2=CMP 170HX (GA100, not in NVIDIA's lists); "
        "20b1=A100 PCIe 40GB (GA100, not in NVIDIA's lists); 20b8=A100X (GA100, not in NVIDIA's lists); "
        "20b9=A30X (GA100, not in NVIDIA's lists); 20bb=DRIVE A100 PROD (GA100, not in NVIDIA's lists); "
        "20be=GRID A100A (GA100, not in NVIDIA's lists); 20bf=GRID A100B (GA100, not in NVIDIA's lists); "
        "20c0=Initial DevID (GA100, not in NVIDIA's lists); 20f0=A100-PG506-207 (GA100, not in NVIDIA's lists); "
        "20f2=A100-PG506-217 (GA100, not in NVIDIA's lists); 20fe=INT SKU (GA100, not in NVIDIA's lists); "
        "2183,21ae,21bf,21c2,21c3=TU116 (not in NVIDIA's lists); 2186=PG160 SKU18 (TU116, not in NVIDIA's lists); "
        "2200,223f=GA102 (not in NVIDIA's lists); 2205=GeForce RTX 3080 Ti 20GB (GA102, not in NVIDIA's lists); "
        "222b=GeForce RTX 3090 Engineering Sample (GA102, not in NVIDIA's lists); "
        "222f=GeForce RTX 3080 11GB / 12GB Engineering Sample (GA102, not in NVIDIA's lists); "
        "2480=Reserved Dev ID A (GA104, not in NVIDIA's lists); 2483,249f,24a4,24df=GA104 (not in NVIDIA's lists); "
        "248c=GeForce RTX 3070 Ti (GA104, not in NVIDIA's lists); "
        "248d=GeForce RTX 3070 (GA104, not in NVIDIA's lists); "
        "248e=GeForce RTX 3060 Ti (GA104, not in NVIDIA's lists); "
        "24ac=GeForce RTX 30x0 Engineering Sample (GA104, not in NVIDIA's lists); "
        "24ad=GeForce RTX 3060 Engineering Sample (GA104, not in NVIDIA's lists); "
        "24af,24bf=GeForce RTX 3070 Engineering Sample (GA104, not in NVIDIA's lists); "
        "24c0=Initial Dev ID B (GA104, not in NVIDIA's lists); "
        "24c8=GeForce RTX 3070 GDDR6X (GA104, not in NVIDIA's lists); "
        "2501=GeForce RTX 3060 (GA106, not in NVIDIA's lists); 2505=GA106 (not in NVIDIA's lists); "
        "2509=GeForce RTX 3060 12GB Rev. 2 (GA106, not in NVIDIA's lists); "
        "252f=GeForce RTX 3060 Engineering Sample (GA106, not in NVIDIA's lists); "
        "2561=GeForce RTX 3060 Laptop GPU (GA106, not in NVIDIA's lists); "
        "2583=GeForce RTX 3050 4GB (GA107, not in NVIDIA's lists); 25a3,25a4=GA107 (not in NVIDIA's lists); "
        "25af=GeForce RTX 3050 Engineering Sample (GA107, not in NVIDIA's lists); "
        "25b5=RTX A4 Mobile (GA107, not in NVIDIA's lists); "
    ),
    ('either', '', '525'): (
        "2302,23b0,23f0=GH100 (not in NVIDIA's lists); 2309=H20 (GH100, not in NVIDIA's lists); "
        "230c=H20 NVL16 (GH100, not in NVIDIA's lists); 2313=H100 CNX (GH100, not in NVIDIA's lists); "
        "2328=H20B (GH100, not in NVIDIA's lists); 2336=H100 (GH100, not in NVIDIA's lists); "
        "2337=H100 SXM5 64GB (GH100, not in NVIDIA's lists); 2338=H100 SXM5 96GB (GH100, not in NVIDIA's lists); "
        "233d=H100 96GB (GH100, not in NVIDIA's lists); 237e=H100 GH3 (GH100, not in NVIDIA's lists); "
        "237f=Skinny Joe (GH100, not in NVIDIA's lists); 2681=RTX TITAN Ada (AD102, not in NVIDIA's lists); "
        "26af=PG137 (AD102, not in NVIDIA's lists); 26b7=L20 (AD102, not in NVIDIA's lists); "
        "26b8=L40G (AD102, not in NVIDIA's lists); 26bb=L30 (AD102, not in NVIDIA's lists); "
        "26f5=L40 CNX (AD102, not in NVIDIA's lists); 2703=GeForce RTX 4080 SUPER (AD103, not in NVIDIA's lists); "
        "2785=AC AD104 20GB (AD104, not in NVIDIA's lists); 27b7=L16 (AD104, not in NVIDIA's lists); "
        "27fa=RTX 4000 Ada Generation Embedded GPU (AD104, not in NVIDIA's lists); "
        "2878=RTX 3000 Ada Generation Embedded GPU (AD106, not in NVIDIA's lists); "
    ),
    ('proprietary', '390', ''): (
        "06cb=GeForce GTX 480 (GF100, not in NVIDIA's lists); 06d0=GF100 (not in NVIDIA's lists); "
        "0f06=GeForce GT 730 (GF108, not in NVIDIA's lists); 1045=GF119 (not in NVIDIA's lists); "
        "104d=GeForce GT 710 (GF119, not in NVIDIA's lists); 108e=Tesla C2090 (GF110, not in NVIDIA's lists); "
        "1202=GeForce GTX 560 Ti OEM (GF114, not in NVIDIA's lists); "
    ),
    ('proprietary', '470', ''): (
        "1003=GeForce GTX Titan LE (GK110, not in NVIDIA's lists); "
        "101e,1020=Tesla K20X (GK110, not in NVIDIA's lists); 101f=Tesla K20 (GK110, not in NVIDIA's lists); "
        "102e=Tesla K40d (GK110, not in NVIDIA's lists); 102f=Tesla Stella Solo (GK110, not in NVIDIA's lists); "
        "103f=Tesla Stella SXM (GK110, not in NVIDIA's lists); 11c1=D14P2-30 (GK106, not in NVIDIA's lists); "
        "11c7=GeForce GTX 750 Ti (GK106, not in NVIDIA's lists); 11d0=GK106-INT353 (GK106, not in NVIDIA's lists); "
        "11d1=GK106-INT343 (GK106, not in NVIDIA's lists); 11d2=GK106-INT232 (GK106, not in NVIDIA's lists); "
        "11d3=GK106-ES (GK106, not in NVIDIA's lists); 11e7=GK106 (not in NVIDIA's lists); "
        "11ff=NB1Q (GK106, not in NVIDIA's lists); 1283=D15M2-10 (GK208, not in NVIDIA's lists); "
        "1285=GK208-100 (GK208, not in NVIDIA's lists); 128a,128c,12a0=GK208 (not in NVIDIA's lists); "
        "1294=GeForce GT 740M (GK208, not in NVIDIA's lists); 12ad=GK208-ES (GK208, not in NVIDIA's lists); "
        "12ae=GK208-CS1-C (GK208, not in NVIDIA's lists); 12af=GK208-INT (GK208, not in NVIDIA's lists); "
        "12b0=GK208-CS-Q (GK208, not in NVIDIA's lists); 12b1=GK208 INT (GK208, not in NVIDIA's lists); "
        "130b=Q12U-1 (GK110, not in NVIDIA's lists); "
    ),
    ('proprietary', '580', ''): (
        "1389=GRID M30 (GM107, not in NVIDIA's lists); 13ad,13bf=GM107 INT52 (GM204, not in NVIDIA's lists); "
        "13ae,13be=GM107 CS1 (GM204, not in NVIDIA's lists); 13bd=Tesla M10 (GM107, not in NVIDIA's lists); "
        "13c1,13c3=GM204 (not in NVIDIA's lists); 13c4=D17U-20 (GM204, not in NVIDIA's lists); "
        "13e4=Graphics Device ES-A (GM204, not in NVIDIA's lists); "
        "13e7=GeForce GTX 980 Engineering Sample (GM204, not in NVIDIA's lists); "
        "1404=GeForce GTX 960 FAKE (GM206, not in NVIDIA's lists); 15c2=CMP 100-100 (GP100, not in NVIDIA's lists); "
        "15f1,1725,172e,172f=GP100 (not in NVIDIA's lists); "
        "15fa=DGX Station / PH402 SKU 200 (GP100, not in NVIDIA's lists); "
        "15fb=GP100 SKU 200 (GP100, not in NVIDIA's lists); "
        "15fc=Tesla P100-DGXS-16GB (GP100, not in NVIDIA's lists); "
        "15ff=GP100 SKU 15ff (GP100, not in NVIDIA's lists); "
        "1613=GRID M60 Service Provider (GM204, not in NVIDIA's lists); "
        "1676=Quadro M2200 Mobile (GM204, not in NVIDIA's lists); 1789=GRID M3-3020 (GM107, not in NVIDIA's lists); "
        "1b01=GeForce GTX 1080 Ti 10GB (GP102, not in NVIDIA's lists); 1b04,1b70,1b78=GP102 (not in NVIDIA's lists); "
        "1b07=P102-100 (GP102, not in NVIDIA's lists); 1b39=Tesla P10 (GP102, not in NVIDIA's lists); "
        "1ba9,1baa=GP104 (not in NVIDIA's lists); "
        "1bad=GeForce GTX 1070 Engineering Sample (GP104, not in NVIDIA's lists); "
        "1c00,1c01,1c2d,1c70=GP106 (not in NVIDIA's lists); "
        "1c35=Quadro P2000 Mobile / DRIVE PX 2 AutoChauffeur (GP106, not in NVIDIA's lists); "
        "1c36=P106M (GP106, not in NVIDIA's lists); 1c8e,1ca7,1ca8,1caa=GP107 (not in NVIDIA's lists); "
        "1ccc=GeForce GTX 1050 Ti Mobile (GP107, not in NVIDIA's lists); "
        "1ccd=GeForce GTX 1050 Mobile (GP107, not in NVIDIA's lists); "
        "1d56=GeForce MX330 (GP108, not in NVIDIA's lists); 1d83,1dc1=CMP 100-200 (GV100, not in NVIDIA's lists); "
        "1d84,1df4=CMP 100-210 (GV100, not in NVIDIA's lists); "
        "1db0=Tesla GV100 SXM2-16GB SKU 890 (GV100, not in NVIDIA's lists); "
        "1db2=Tesla V100 DGXS 16GB (GV100, not in NVIDIA's lists); "
        "1dbd=Tesla GV100 DGX1-V (GV100, not in NVIDIA's lists); 1dbe=GV100 (not in NVIDIA's lists); "
    ),
}

_CHIP_IDS = {
    ('AD102', 'Ada'): (
        '2681,2684,2685,2689,26af,26b1,26b2,26b3,26b5,26b7,26b8,26b9,26ba,26bb,26f5,'
    ),
    ('AD103', 'Ada'): (
        '2702,2703,2704,2705,2709,2717,2730,2757,2770,'
    ),
    ('AD104', 'Ada'): (
        '2782,2783,2785,2786,2788,27a0,27b0,27b1,27b2,27b6,27b7,27b8,27ba,27bb,27e0,27fa,27fb,'
    ),
    ('AD106', 'Ada'): (
        '2803,2805,2808,2820,2822,2838,2860,2878,'
    ),
    ('AD107', 'Ada'): (
        '2882,28a0,28a1,28a3,28b0,28b8,28b9,28ba,28bb,28e0,28e1,28e3,28f8,'
    ),
    ('GA100', 'Ampere'): (
        '2080,2081,2082,20b0,20b1,20b2,20b3,20b4,20b5,20b6,20b7,20b8,20b9,20bb,20bd,20be,20bf,20c0,20c2,'
        '20f0,20f1,20f2,20f3,20f5,20f6,20fd,20fe,20ff,'
    ),
    ('GA102', 'Ampere'): (
        '2200,2203,2204,2205,2206,2207,2208,220a,220d,2216,222b,222f,2230,2231,2232,2233,2235,2236,2237,'
        '2238,223f,'
    ),
    ('GA103', 'Ampere'): (
        '2414,2420,2438,2460,'
    ),
    ('GA104', 'Ampere'): (
        '2480,2482,2483,2484,2486,2487,2488,2489,248a,248c,248d,248e,249c,249d,249f,24a0,24a4,24ac,24ad,'
        '24af,24b0,24b1,24b6,24b7,24b8,24b9,24ba,24bb,24bf,24c0,24c7,24c8,24c9,24dc,24dd,24df,24e0,24fa,'
    ),
    ('GA106', 'Ampere'): (
        '2501,2503,2504,2505,2507,2508,2509,2520,2521,2523,252f,2531,2544,2560,2561,2563,2571,'
    ),
    ('GA107', 'Ampere'): (
        '2582,2583,2584,25a0,25a2,25a3,25a4,25a5,25a6,25a7,25a9,25aa,25ab,25ac,25ad,25af,25b0,25b2,25b5,'
        '25b6,25b8,25b9,25ba,25bb,25bc,25bd,25e0,25e2,25e5,25ec,25ed,25f9,25fa,25fb,'
    ),
    ('GB100', 'Blackwell'): (
        '2900,2901,2909,2920,2924,2925,293d,2940,2941,297e,'
    ),
    ('GB102', 'Blackwell'): (
        '2980,29bb,29bc,29c0,29f1,'
    ),
    ('GB10B', 'Blackwell'): (
        '2b00,'
    ),
    ('GB110', 'Blackwell'): (
        '3180,3182,31a1,31c0,31c2,31c3,31fe,'
    ),
    ('GB112', 'Blackwell'): (
        '3200,3224,323e,'
    ),
    ('GB120', 'Blackwell'): (
        '3340,'
    ),
    ('GB202', 'Blackwell'): (
        '2b85,2b87,2b8c,2bb1,2bb2,2bb3,2bb4,2bb5,2bb9,2bbc,'
    ),
    ('GB203', 'Blackwell'): (
        '2c02,2c05,2c18,2c19,2c31,2c33,2c34,2c38,2c39,2c3a,2c58,2c59,2c77,2c79,'
    ),
    ('GB205', 'Blackwell'): (
        '2f04,2f06,2f18,2f38,2f58,'
    ),
    ('GB206', 'Blackwell'): (
        '2d04,2d05,2d18,2d19,2d30,2d39,2d58,2d59,2d79,'
    ),
    ('GB207', 'Blackwell'): (
        '2d83,2d98,2db8,2db9,2dd8,2df9,'
    ),
    ('GB20B', 'Blackwell'): (
        '2e03,2e06,2e12,2e13,2e2a,'
    ),
    ('GF100', 'Fermi'): (
        '06c0,06c4,06ca,06cb,06cd,06d0,06d1,06d2,06d8,06d9,06da,06dc,06dd,06de,06df,109a,109b,'
    ),
    ('GF104', 'Fermi'): (
        '0e22,0e23,0e24,0e30,0e31,0e3a,0e3b,'
    ),
    ('GF106', 'Fermi'): (
        '0dc0,0dc4,0dc5,0dc6,0dcd,0dce,0dd1,0dd2,0dd3,0dd6,0dd8,0dda,'
    ),
    ('GF108', 'Fermi'): (
        '0de0,0de1,0de2,0de3,0de4,0de5,0de7,0de8,0de9,0dea,0deb,0dec,0ded,0dee,0def,0df0,0df1,0df2,0df3,'
        '0df4,0df5,0df6,0df7,0df8,0df9,0dfa,0dfc,0f00,0f01,0f02,0f03,0f06,'
    ),
    ('GF110', 'Fermi'): (
        '1080,1081,1082,1084,1086,1087,1088,1089,108b,108e,1091,1094,1096,'
    ),
    ('GF114', 'Fermi'): (
        '1200,1201,1202,1203,1205,1206,1207,1208,1210,1211,1212,1213,'
    ),
    ('GF116', 'Fermi'): (
        '1241,1243,1244,1245,1246,1247,1248,1249,124b,124d,1251,'
    ),
    ('GF117', 'Fermi'): (
        '1140,'
    ),
    ('GF119', 'Fermi'): (
        '1040,1042,1045,1048,1049,104a,104b,104c,104d,1050,1051,1052,1054,1055,1056,1057,1058,1059,105a,'
        '105b,107c,107d,'
    ),
    ('GH100', 'Hopper'): (
        '2302,2309,230c,230e,2313,2321,2322,2324,2328,2329,232c,2330,2331,2335,2336,2337,2338,2339,233a,'
        '233b,233d,2342,2343,2345,2348,237e,237f,23b0,23f0,'
    ),
    ('GK104', 'Kepler'): (
        '1180,1182,1183,1184,1185,1186,1187,1188,1189,118a,118b,118c,118d,118e,118f,1191,1193,1194,1195,'
        '1198,1199,119a,119d,119e,119f,11a0,11a1,11a2,11a3,11a4,11a5,11a7,11a8,11a9,11aa,11ac,11af,11b0,'
        '11b1,11b4,11b6,11b7,11b8,11b9,11ba,11bb,11bc,11bd,11be,11bf,'
    ),
    ('GK106', 'Kepler'): (
        '11c0,11c1,11c2,11c3,11c4,11c5,11c6,11c7,11c8,11cb,11d0,11d1,11d2,11d3,11e0,11e1,11e2,11e3,11e7,'
        '11fa,11fc,11ff,'
    ),
    ('GK107', 'Kepler'): (
        '0fc0,0fc1,0fc2,0fc4,0fc5,0fc6,0fc8,0fc9,0fcb,0fcc,0fcd,0fce,0fcf,0fd0,0fd1,0fd2,0fd3,0fd4,0fd5,'
        '0fd6,0fd7,0fd8,0fd9,0fda,0fdb,0fdc,0fdd,0fde,0fdf,0fe0,0fe1,0fe2,0fe3,0fe4,0fe5,0fe6,0fe7,0fe8,'
        '0fe9,0fea,0fec,0fed,0fee,0fef,0ff0,0ff1,0ff2,0ff3,0ff5,0ff6,0ff7,0ff8,0ff9,0ffa,0ffb,0ffc,0ffd,'
        '0ffe,0fff,'
    ),
    ('GK110', 'Kepler'): (
        '1001,1003,1004,1005,1007,1008,100a,100c,101e,101f,1020,1021,1022,1023,1026,1027,1028,1029,102a,'
        '102e,102f,103a,103c,103f,130b,'
    ),
    ('GK180', 'Kepler'): (
        '1024,'
    ),
    ('GK208', 'Kepler'): (
        '1280,1281,1282,1283,1284,1285,1286,1287,1288,1289,128a,128b,128c,1290,1291,1292,1293,1294,1295,'
        '1296,1298,1299,129a,12a0,12ad,12ae,12af,12b0,12b1,12b9,12ba,'
    ),
    ('GK210', 'Kepler'): (
        '102d,'
    ),
    ('GM107', 'Maxwell'): (
        '1380,1381,1382,1389,1390,1391,1392,1393,1398,1399,139a,139b,139c,139d,13b0,13b1,13b2,13b3,13b4,'
        '13b6,13b9,13ba,13bb,13bc,13bd,1789,179c,'
    ),
    ('GM108', 'Maxwell'): (
        '1340,1341,1344,1346,1347,1348,1349,134b,134d,134e,134f,137a,137b,137d,174d,174e,'
    ),
    ('GM200', 'Maxwell'): (
        '17c2,17c8,17f0,17f1,17fd,'
    ),
    ('GM204', 'Maxwell'): (
        '13ad,13ae,13be,13bf,13c0,13c1,13c2,13c3,13c4,13d7,13d8,13d9,13da,13e4,13e7,13f0,13f1,13f2,13f3,'
        '13f8,13f9,13fa,13fb,1613,1617,1618,1619,161a,1667,1676,'
    ),
    ('GM206', 'Maxwell'): (
        '1401,1402,1404,1406,1407,1427,1430,1431,1436,'
    ),
    ('GP100', 'Pascal'): (
        '15c2,15f0,15f1,15f7,15f8,15f9,15fa,15fb,15fc,15ff,1725,172e,172f,'
    ),
    ('GP102', 'Pascal'): (
        '1b00,1b01,1b02,1b04,1b06,1b07,1b30,1b38,1b39,1b70,1b78,'
    ),
    ('GP104', 'Pascal'): (
        '1b80,1b81,1b82,1b83,1b84,1b87,1ba0,1ba1,1ba2,1ba9,1baa,1bad,1bb0,1bb1,1bb3,1bb4,1bb5,1bb6,1bb7,'
        '1bb8,1bb9,1bbb,1bc7,1be0,1be1,'
    ),
    ('GP106', 'Pascal'): (
        '1c00,1c01,1c02,1c03,1c04,1c06,1c07,1c09,1c20,1c21,1c22,1c23,1c2d,1c30,1c31,1c35,1c36,1c60,1c61,'
        '1c62,1c70,'
    ),
    ('GP107', 'Pascal'): (
        '1c81,1c82,1c83,1c8c,1c8d,1c8e,1c8f,1c90,1c91,1c92,1c94,1c96,1ca7,1ca8,1caa,1cb1,1cb2,1cb3,1cb6,'
        '1cba,1cbb,1cbc,1cbd,1ccc,1ccd,1cfa,1cfb,'
    ),
    ('GP108', 'Pascal'): (
        '1d01,1d02,1d10,1d11,1d12,1d13,1d16,1d33,1d34,1d52,1d56,'
    ),
    ('GV100', 'Volta'): (
        '1d81,1d83,1d84,1db0,1db1,1db2,1db3,1db4,1db5,1db6,1db7,1db8,1dba,1dbd,1dbe,1dc1,1df0,1df2,1df4,'
        '1df5,1df6,'
    ),
    ('TU102', 'Turing'): (
        '1e02,1e03,1e04,1e07,1e09,1e2d,1e2e,1e30,1e35,1e36,1e37,1e38,1e3c,1e3d,1e3e,1e78,'
    ),
    ('TU104', 'Turing'): (
        '1e81,1e82,1e84,1e87,1e89,1e90,1e91,1e93,1eab,1eae,1eb0,1eb1,1eb4,1eb5,1eb6,1eb8,1eb9,1eba,1ebe,'
        '1ec2,1ec7,1ed0,1ed1,1ed3,1ef5,'
    ),
    ('TU106', 'Turing'): (
        '1f02,1f03,1f04,1f06,1f07,1f08,1f09,1f0a,1f0b,1f10,1f11,1f12,1f14,1f15,1f2e,1f36,1f42,1f47,1f50,'
        '1f51,1f54,1f55,1f76,'
    ),
    ('TU116', 'Turing'): (
        '2182,2183,2184,2186,2187,2188,2189,2191,2192,21ae,21bf,21c2,21c3,21c4,21d1,'
    ),
    ('TU117', 'Turing'): (
        '1f81,1f82,1f83,1f91,1f92,1f94,1f95,1f96,1f97,1f98,1f99,1f9c,1f9d,1f9f,1fa0,1fa1,1fae,1fb0,1fb1,'
        '1fb2,1fb6,1fb7,1fb8,1fb9,1fba,1fbb,1fbc,1fbf,1fd9,1fdd,1ff0,1ff2,1ff9,'
    ),
}

GPUS = {}
BY_CHIP = set()
for _packed, _by_chip in ((_PACKED, False), (_BY_CHIP, True)):
    for _key, _text in _packed.items():
        for _item in _text.split("; "):
            if _item:
                _ids, _name = _item.split("=", 1)
                for _id in _ids.split(","):
                    GPUS["0x" + _id] = (_name,) + _key
                    if _by_chip:
                        BY_CHIP.add("0x" + _id)

CHIPS = {}
ARCHITECTURES = {}
for (_chip, _architecture), _text in _CHIP_IDS.items():
    ARCHITECTURES[_chip] = _architecture
    for _id in _text.split(","):
        if _id:
            CHIPS["0x" + _id] = _chip

"""A YOLOv5s-shaped one-stage detector written in torch, for the benchmark (no trained weights).

Backbone: a 6x6 stride-2 stem, then stride-2 3x3 convolutions each followed by a C3 block (CSP bottleneck:
two 1x1 branches, one through residual bottlenecks, concatenated and mixed by a 1x1), and an SPPF block
(three chained 5x5 max pools, concatenated). Neck: a PAN (1x1 reduce, nearest x2 upsample, concatenate with
the backbone feature of that stride, C3; then back down with stride-2 convolutions). Head: a 1x1
convolution per stride (8, 16, 32) to 3 anchors x (4 box + 1 objectness + 80 classes), decoded in the graph
as YOLOv5 does: sigmoid, box centres from the cell grid, sizes from the anchors, all scales concatenated to
BATCH x 25200 x 85 at 640x640. Widths and depths are YOLOv5s's (width 0.5, depth 0.33 of the large model).
Convolutions are Conv + BatchNorm + SiLU, as exported they fold to Conv + Sigmoid + Mul.
"""
import torch
import torch.nn as nn

CLASSES = 80
IMAGE_SIZE = 640
STRIDES = (8, 16, 32)
ANCHORS = (  # pixels, per stride: three (width, height) pairs
    ((10, 13), (16, 30), (33, 23)),
    ((30, 61), (62, 45), (59, 119)),
    ((116, 90), (156, 198), (373, 326)),
)


class ConvBnSiLU(nn.Module):
    def __init__(self, c_in, c_out, kernel=1, stride=1, padding=None):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2 if padding is None else padding, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, channels, shortcut):
        super().__init__()
        self.reduce = ConvBnSiLU(channels, channels, 1)
        self.conv = ConvBnSiLU(channels, channels, 3)
        self.shortcut = shortcut

    def forward(self, x):
        y = self.conv(self.reduce(x))
        return x + y if self.shortcut else y


class C3(nn.Module):
    def __init__(self, c_in, c_out, depth, shortcut=True):
        super().__init__()
        hidden = c_out // 2
        self.branch = ConvBnSiLU(c_in, hidden, 1)
        self.skip = ConvBnSiLU(c_in, hidden, 1)
        self.blocks = nn.Sequential(*[Bottleneck(hidden, shortcut) for _ in range(depth)])
        self.mix = ConvBnSiLU(2 * hidden, c_out, 1)

    def forward(self, x):
        return self.mix(torch.cat([self.blocks(self.branch(x)), self.skip(x)], 1))


class SPPF(nn.Module):
    def __init__(self, c_in, c_out, kernel=5):
        super().__init__()
        hidden = c_in // 2
        self.reduce = ConvBnSiLU(c_in, hidden, 1)
        self.pool = nn.MaxPool2d(kernel, 1, kernel // 2)
        self.mix = ConvBnSiLU(4 * hidden, c_out, 1)

    def forward(self, x):
        x = self.reduce(x)
        p1 = self.pool(x)
        p2 = self.pool(p1)
        return self.mix(torch.cat([x, p1, p2, self.pool(p2)], 1))


class DetectHead(nn.Module):
    """Per stride a 1x1 prediction convolution, decoded to (x, y, w, h, objectness, classes) in pixels."""

    def __init__(self, channels):
        super().__init__()
        self.outputs = 5 + CLASSES
        self.predict = nn.ModuleList(nn.Conv2d(c, len(ANCHORS[0]) * self.outputs, 1) for c in channels)
        for index, stride in enumerate(STRIDES):
            cells = IMAGE_SIZE // stride
            ys, xs = torch.meshgrid(torch.arange(cells), torch.arange(cells), indexing="ij")
            grid = torch.stack([xs, ys], -1).float().view(1, 1, cells, cells, 2)
            anchors = torch.tensor(ANCHORS[index], dtype=torch.float32).view(1, len(ANCHORS[index]), 1, 1, 2)
            self.register_buffer(f"grid{index}", grid)
            self.register_buffer(f"anchors{index}", anchors)

    def forward(self, features):
        decoded = []
        for index, (predict, x) in enumerate(zip(self.predict, features)):
            batch, _, height, width = x.shape
            y = predict(x).view(batch, len(ANCHORS[index]), self.outputs, height, width).permute(0, 1, 3, 4, 2)
            y = y.sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + getattr(self, f"grid{index}")) * STRIDES[index]
            wh = (y[..., 2:4] * 2) ** 2 * getattr(self, f"anchors{index}")
            decoded.append(torch.cat([xy, wh, y[..., 4:]], -1).view(batch, -1, self.outputs))
        return torch.cat(decoded, 1)


class Detector(nn.Module):
    def __init__(self, width=(32, 64, 128, 256, 512), depth=(1, 2, 3, 1)):
        super().__init__()
        c1, c2, c3, c4, c5 = width
        self.stem = ConvBnSiLU(3, c1, 6, 2, 2)
        self.stage2 = nn.Sequential(ConvBnSiLU(c1, c2, 3, 2), C3(c2, c2, depth[0]))
        self.stage3 = nn.Sequential(ConvBnSiLU(c2, c3, 3, 2), C3(c3, c3, depth[1]))
        self.stage4 = nn.Sequential(ConvBnSiLU(c3, c4, 3, 2), C3(c4, c4, depth[2]))
        self.stage5 = nn.Sequential(ConvBnSiLU(c4, c5, 3, 2), C3(c5, c5, depth[3]), SPPF(c5, c5))
        self.reduce5 = ConvBnSiLU(c5, c4, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.top_down4 = C3(2 * c4, c4, depth[0], shortcut=False)
        self.reduce4 = ConvBnSiLU(c4, c3, 1)
        self.top_down3 = C3(2 * c3, c3, depth[0], shortcut=False)
        self.down3 = ConvBnSiLU(c3, c3, 3, 2)
        self.bottom_up4 = C3(2 * c3, c4, depth[0], shortcut=False)
        self.down4 = ConvBnSiLU(c4, c4, 3, 2)
        self.bottom_up5 = C3(2 * c4, c5, depth[0], shortcut=False)
        self.head = DetectHead((c3, c4, c5))

    def forward(self, image):
        p3 = self.stage3(self.stage2(self.stem(image)))
        p4 = self.stage4(p3)
        h5 = self.reduce5(self.stage5(p4))
        h4 = self.reduce4(self.top_down4(torch.cat([self.up(h5), p4], 1)))
        out3 = self.top_down3(torch.cat([self.up(h4), p3], 1))
        out4 = self.bottom_up4(torch.cat([self.down3(out3), h4], 1))
        out5 = self.bottom_up5(torch.cat([self.down4(out4), h5], 1))
        return self.head([out3, out4, out5])

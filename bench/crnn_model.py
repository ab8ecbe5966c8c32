"""A CRNN text recogniser (convolutional features + bidirectional LSTMs + per-column classes), for the benchmark.

The layout of Shi et al.'s CRNN: a grey 32 x 100 text line through seven 3x3 convolutions (BatchNorm on
three) and max pools that halve the height to 1 while keeping 26 columns, the columns read as a sequence
of 512-vectors by two bidirectional LSTMs of 256 hidden units (each followed by a linear map), and 37
class scores (digits, letters, CTC blank) per column. Output: 26 x BATCH x 37, time first.
"""
import torch.nn as nn

HEIGHT, WIDTH, CLASSES, HIDDEN = 32, 100, 37, 256


def conv_block(c_in, c_out, kernel=3, padding=1, batch_norm=False):
    layers = [nn.Conv2d(c_in, c_out, kernel, 1, padding)]
    if batch_norm:
        layers.append(nn.BatchNorm2d(c_out))
    return layers + [nn.ReLU()]


class BidirectionalLSTM(nn.Module):
    def __init__(self, c_in, hidden, c_out):
        super().__init__()
        self.rnn = nn.LSTM(c_in, hidden, bidirectional=True)
        self.project = nn.Linear(2 * hidden, c_out)

    def forward(self, x):  # time x batch x features
        return self.project(self.rnn(x)[0])


class CRNN(nn.Module):
    def __init__(self):
        super().__init__()
        tall_pool = nn.MaxPool2d((2, 2), (2, 1), (0, 1))  # halves the height, keeps (one more than) the width
        self.features = nn.Sequential(
            *conv_block(1, 64), nn.MaxPool2d(2, 2),
            *conv_block(64, 128), nn.MaxPool2d(2, 2),
            *conv_block(128, 256, batch_norm=True), *conv_block(256, 256), tall_pool,
            *conv_block(256, 512, batch_norm=True), *conv_block(512, 512), nn.MaxPool2d((2, 2), (2, 1), (0, 1)),
            *conv_block(512, 512, kernel=2, padding=0, batch_norm=True),
        )
        self.sequence = nn.Sequential(BidirectionalLSTM(512, HIDDEN, HIDDEN),
                                      BidirectionalLSTM(HIDDEN, HIDDEN, CLASSES))

    def forward(self, image):
        columns = self.features(image).squeeze(2).permute(2, 0, 1)  # batch x 512 x 1 x 26 -> 26 x batch x 512
        return self.sequence(columns)

// Behavioural model of the DSP48E2 subset that nnrtl.hw.arith.dsp48e2.DSP48E2Slice
// instantiates, for Verilator: 27 x 18 signed multiply, C, PCIN (and PCIN >> 17), the
// P feedback, ALUMODE 0000 (Z + W + X + Y) and 0011 (Z - (W + X + Y)), registers
// A/B (0-2 stages), C, M, P (0-1) with clock enables and synchronous resets. Carry-in,
// the pre-adder, SIMD, pattern detection and the A/B cascades are not modelled: an
// attribute or control value outside the subset stops the simulation at time 0.
// Written from UG579 (UltraScale Architecture DSP Slice), not from vendor code.
module DSP48E2 #(
    parameter A_INPUT = "DIRECT",
    parameter B_INPUT = "DIRECT",
    parameter AMULTSEL = "A",
    parameter BMULTSEL = "B",
    parameter PREADDINSEL = "A",
    parameter USE_MULT = "MULTIPLY",
    parameter USE_SIMD = "ONE48",
    parameter USE_PATTERN_DETECT = "NO_PATDET",
    parameter integer AREG = 1,
    parameter integer ACASCREG = 1,
    parameter integer BREG = 1,
    parameter integer BCASCREG = 1,
    parameter integer CREG = 1,
    parameter integer MREG = 1,
    parameter integer PREG = 1,
    parameter integer ADREG = 1,
    parameter integer DREG = 1,
    parameter integer INMODEREG = 1,
    parameter integer OPMODEREG = 1,
    parameter integer ALUMODEREG = 1,
    parameter integer CARRYINREG = 1,
    parameter integer CARRYINSELREG = 1
) (
    input wire CLK,
    input wire [29:0] A,
    input wire [17:0] B,
    input wire [47:0] C,
    input wire [26:0] D,
    input wire [47:0] PCIN,
    input wire [8:0] OPMODE,
    input wire [3:0] ALUMODE,
    input wire [4:0] INMODE,
    input wire [2:0] CARRYINSEL,
    input wire CARRYIN,
    input wire CEA1, input wire CEA2, input wire CEB1, input wire CEB2,
    input wire CEC, input wire CEM, input wire CEP,
    input wire CEAD, input wire CED, input wire CEINMODE, input wire CECTRL,
    input wire CEALUMODE, input wire CECARRYIN,
    input wire RSTA, input wire RSTB, input wire RSTC, input wire RSTM, input wire RSTP,
    input wire RSTD, input wire RSTINMODE, input wire RSTCTRL, input wire RSTALUMODE,
    input wire RSTALLCARRYIN,
    output wire [47:0] P,
    output wire [47:0] PCOUT
);
    // attributes and controls outside the subset
    initial begin
        if (A_INPUT != "DIRECT" || B_INPUT != "DIRECT" || AMULTSEL != "A"
                || BMULTSEL != "B" || PREADDINSEL != "A" || USE_SIMD != "ONE48"
                || USE_PATTERN_DETECT != "NO_PATDET"
                || (USE_MULT != "MULTIPLY" && USE_MULT != "NONE"))
            $fatal(1, "DSP48E2 subset model: unsupported attribute in %m");
        if (AREG > 2 || BREG > 2 || CREG > 1 || MREG > 1 || PREG > 1 || ACASCREG != AREG
                || BCASCREG != BREG || INMODEREG != 0 || OPMODEREG != 0
                || ALUMODEREG != 0 || CARRYINREG != 0 || CARRYINSELREG != 0)
            $fatal(1, "DSP48E2 subset model: unsupported register attribute in %m");
    end

    always @(posedge CLK) begin
        if (INMODE != 5'b0 || CARRYINSEL != 3'b0 || CARRYIN != 1'b0
                || (ALUMODE != 4'b0000 && ALUMODE != 4'b0011)
                || OPMODE[1:0] != OPMODE[3:2] || OPMODE[1] != 1'b0 || OPMODE[6:4] == 3'b100
                || OPMODE[6:4] == 3'b111 || OPMODE[8:7] == 2'b10
                || (OPMODE[0] && USE_MULT != "MULTIPLY"))
            $fatal(1, "DSP48E2 subset model: unsupported control (OPMODE %b, ALUMODE %b) in %m",
                   OPMODE, ALUMODE);
    end

    // A and B: up to two register stages; the second loads on CEx2, the first on CEx1
    reg [29:0] a1 = 30'b0, a2 = 30'b0;
    reg [17:0] b1 = 18'b0, b2 = 18'b0;
    always @(posedge CLK) begin
        if (RSTA) begin
            a1 <= 30'b0;
            a2 <= 30'b0;
        end else begin
            if (CEA1) a1 <= A;
            if (CEA2) a2 <= (AREG == 2) ? a1 : A;
        end
        if (RSTB) begin
            b1 <= 18'b0;
            b2 <= 18'b0;
        end else begin
            if (CEB1) b1 <= B;
            if (CEB2) b2 <= (BREG == 2) ? b1 : B;
        end
    end
    wire [29:0] a_data = (AREG == 0) ? A : a2;
    wire [17:0] b_data = (BREG == 0) ? B : b2;

    // the product of A[26:0] and B, both signed, as 48 bits
    wire signed [26:0] a_mult = a_data[26:0];
    wire signed [17:0] b_mult = b_data;
    wire signed [44:0] product = (USE_MULT == "MULTIPLY") ? a_mult * b_mult : 45'sb0;
    reg [44:0] m_reg = 45'b0;
    always @(posedge CLK)
        if (RSTM) m_reg <= 45'b0;
        else if (CEM) m_reg <= product;
    wire [44:0] m_data = (MREG == 0) ? product : m_reg;
    wire [47:0] m_ext = {{3{m_data[44]}}, m_data};

    reg [47:0] c_reg = 48'b0;
    always @(posedge CLK)
        if (RSTC) c_reg <= 48'b0;
        else if (CEC) c_reg <= C;
    wire [47:0] c_data = (CREG == 0) ? C : c_reg;

    reg [47:0] p_reg = 48'b0;
    reg [47:0] xy, z, w;
    always @(*) begin
        xy = OPMODE[0] ? m_ext : 48'b0;
        case (OPMODE[6:4])
            3'b001: z = PCIN;
            3'b010: z = p_reg;
            3'b011: z = c_data;
            3'b101: z = {{17{PCIN[47]}}, PCIN[47:17]};
            3'b110: z = {{17{p_reg[47]}}, p_reg[47:17]};
            default: z = 48'b0;
        endcase
        case (OPMODE[8:7])
            2'b01: w = p_reg;
            2'b11: w = c_data;
            default: w = 48'b0;
        endcase
    end
    wire [47:0] addend = w + xy;
    wire [47:0] alu = (ALUMODE == 4'b0011) ? z - addend : z + addend;

    always @(posedge CLK)
        if (RSTP) p_reg <= 48'b0;
        else if (CEP && PREG == 1) p_reg <= alu;
    assign P = (PREG == 0) ? alu : p_reg;
    assign PCOUT = P;
endmodule
